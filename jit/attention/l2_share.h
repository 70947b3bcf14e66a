// The share of L2 that the attention kernels' tile orders plan for: the K/V
// of one group of heads (jit/attention/sm90/tile_order.h) or of sequences (a
// ragged batch's prepare step, jit/attention/varlen/varlen_prepare.h) that
// CTAs working at the same time keep there between their tiles.
#pragma once
#include <cstdint>

namespace jit::detail {

// A half of the H100's and H200's 50 MB, the rest for Q, O and other traffic.
constexpr std::int64_t kTileGroupL2Bytes = std::int64_t{24} << 20;

}  // namespace jit::detail
