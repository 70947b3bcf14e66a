// Epilogue: normalize O by the row sums, convert to T, stage each warp's rows
// in shared memory (the Q tile's space, which that warp alone used) and write
// them out with 16-byte coalesced stores; LSE in natural log when asked.
// SPLIT_COLUMNS (the FP8 kernel): n-tiles 2j and 2j+1 hold the even and the
// odd columns of 16j..16j+15, so each thread's four values of a row are
// adjacent columns; `out_scale` multiplies every value (v's descale).
#pragma once
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/common/smem_tile.cuh"

namespace cujit::portable {

template <class T, int BM, int D, int MT, int NT, int DT, bool SPLIT_COLUMNS>
__device__ __forceinline__ void write_output(const float (&o)[MT][DT][4], const OnlineSoftmax<MT, NT, DT>& softmax,
                                             float out_scale, u32 smem_o, char* o_tile, i64 o_row_stride, float* lse_tile,
                                             int rows_valid, int warp_row0, int lane) {
  constexpr int kElementBytes = element_traits<T>::bytes;
  using Tile = SmemTile<BM, D, kElementBytes>;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax.total_sum(mt, r);
      const float inv = softmax.normalizer(l) * out_scale;
      const int row = warp_row0 + mt * 16 + lane / 4 + 8 * r;
      if constexpr (SPLIT_COLUMNS) {
#pragma unroll
        for (int j = 0; j < DT / 2; ++j) {
          const float(&even)[4] = o[mt][2 * j];
          const float(&odd)[4] = o[mt][2 * j + 1];
          const u32 lo = cvt_rn_x2<T>(even[2 * r] * inv, odd[2 * r] * inv);
          const u32 hi = cvt_rn_x2<T>(even[2 * r + 1] * inv, odd[2 * r + 1] * inv);
          st_shared_v2_b32(smem_o + Tile::offset(row, j * 16 + 4 * (lane % 4)), lo, hi);
        }
      } else {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          const u32 packed = to_packed<T>(o[mt][dt], r, inv);
          st_shared_b32(smem_o + Tile::offset(row, dt * 8 + 2 * (lane % 4)), packed);
        }
      }
      if (lse_tile != nullptr && lane % 4 == 0 && row < rows_valid) {
        lse_tile[row] = softmax.lse(mt, r, l);
      }
    }
  }
  __syncwarp();
  constexpr int kChunks = Tile::kChunks;
  constexpr int kWarpChunks = MT * 16 * kChunks;
  static_assert(kWarpChunks % 32 == 0, "each lane stores whole chunks");
#pragma unroll
  for (int it = 0; it < kWarpChunks / 32; ++it) {
    const int idx = it * 32 + lane;
    const int row = warp_row0 + idx / kChunks;
    const int col = (idx % kChunks) * Tile::kChunkElements;
    if (row < rows_valid) {
      u32 v[4];
      ld_shared_v4_b32(v, smem_o + Tile::offset(row, col));
      st_global_v4_b32(o_tile + (row * o_row_stride + col) * kElementBytes, v);
    }
  }
}

}  // namespace cujit::portable
