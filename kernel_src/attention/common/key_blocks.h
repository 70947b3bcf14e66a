// Which key blocks a query tile visits, and from which block on they need a
// mask: one function for the kernels (sm90, portable) and the host's
// estimate of a tile's work (jit/attention/sm90/tile_order.cpp). Plain constexpr C++,
// no includes beyond host_device.h, so NVRTC and the host both take it.
#pragma once
#include "common/host_device.h"

namespace cujit {

// The device's min and max (integer min/max instructions, which the
// compiler keeps as such through the arithmetic around them); plain
// comparisons on the host.
CUJIT_HOST_DEVICE constexpr int key_blocks_min(int a, int b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}
CUJIT_HOST_DEVICE constexpr int key_blocks_max(int a, int b) {
#if defined(__CUDA_ARCH__)
  return max(a, b);
#else
  return a > b ? a : b;
#endif
}

// Key blocks [0, count) of BN keys each; blocks from first_masked on hold keys
// past seq_k or, with a causal mask, past some row's diagonal.
struct KeyBlockRange {
  int count;
  int first_masked;
};

// For query rows [m0, min(m0 + bm, seq_q)): key j is visible to row i iff
// j < seq_k and, when causal, j <= i + causal_offset. A tile whose rows see
// no key (Sq > Sk, bottom-right) gets count 0.
CUJIT_HOST_DEVICE constexpr KeyBlockRange key_block_range(int m0, int bm, int bn, int seq_q, int seq_k, bool causal,
                                                          int causal_offset) {
  // Divisions of non-negative values, in unsigned arithmetic: a shift or a
  // multiply, without the predicated sign fix-up that signed division adds
  // (whose registers the SASS audit cannot tell apart from data).
  int n_end = seq_k;
  int first_masked = int(unsigned(seq_k) / unsigned(bn));
  if (causal) {
    n_end = key_blocks_min(n_end, key_blocks_min(bm, seq_q - m0) + m0 + causal_offset);
    first_masked =
        key_blocks_min(first_masked, int(unsigned(key_blocks_max(0, m0 + causal_offset + 1)) / unsigned(bn)));
  }
  return {int((unsigned(key_blocks_max(n_end, 0)) + unsigned(bn) - 1) / unsigned(bn)), first_masked};
}

}  // namespace cujit
