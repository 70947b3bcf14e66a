// Parameters of l2_scrub.cu: plain data shared by the host and device code.
#pragma once

namespace cujit {

// Threads per CTA and CTAs per SM of the scrub.
constexpr int kL2ScrubThreads = 256;
constexpr int kL2ScrubCtasPerSm = 4;

struct L2ScrubParams {
  const void* data;             // the buffer, 16-byte aligned and zero-filled
  unsigned long long chunks;    // its size in 16-byte chunks
  unsigned* sink;               // one word per warp of the grid: each warp's XOR, all zero
};

}  // namespace cujit
