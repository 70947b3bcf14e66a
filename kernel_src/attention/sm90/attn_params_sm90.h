// The kernel argument of the sm90 family: TMA descriptors for Q, K, V and O
// (encoded on the host with cuTensorMapEncodeTiled, read by the TMA unit from
// kernel parameter space) and the common attention parameters. Plain data,
// no includes beyond the common struct, so NVRTC and the host both accept it.
#pragma once
#include "attention/attn_params.h"
#include "common/fast_divisor.h"

namespace cujit {

// Same size and alignment as the driver's CUtensorMap.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

struct Sm90AttnParams {
  // 4-D maps over (D, S, H, B), innermost first, 128-byte swizzled, with
  // boxes of (64, 64, 1, 1) for Q and O (one warpgroup's rows) and
  // (64, BN, 1, 1) for K and V.
  TmaDescriptor q, k, v, o;
  AttnParams attn;
  int m_blocks;     // ceil(seq_q / BM)
  int total_tiles;  // m_blocks * heads_q * batch
  int tiles_by_rows;  // the order of the tiles: 1 m-block-major, 0 head-major
  // A tile index divided by the count of its fast-moving coordinate
  // (tiles_by_rows: batch * heads_q, else m_blocks), then a (batch, head)
  // index by heads_q.
  FastDivisor tile_divisor, head_divisor;
};

}  // namespace cujit
