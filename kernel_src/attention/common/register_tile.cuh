// Register tiles in the accumulator layout shared by mma.sync m16n8 and
// wgmma m64nN (per warp): float[MT][NT][4] is MT 16-row m-tiles of NT
// 8-column tiles, each thread holding rows g and g + 8 (g = lane / 4) at
// columns 2 (lane % 4) and 2 (lane % 4) + 1. The operations both attention
// kernels repeat on them: zero, convert to a 16-bit A operand or to packed
// output, and the reductions across the four threads of a row.
#pragma once
#include "common/ptx.cuh"

namespace cujit {

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&tile)[MT][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile[mt][nt][e] = 0.f;
}
template <int N>
__device__ __forceinline__ void zero(float (&tiles)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) tiles[i][e] = 0.f;
}

// 8-column tiles 2 kk and 2 kk + 1 of m-tile mt as the (16, 16) A operand
// of the next matrix product, in T: the accumulator layout of two adjacent
// tiles is the A fragment layout.
template <class T, int MT, int NT>
__device__ __forceinline__ void to_operand_a(const float (&acc)[MT][NT][4], int mt, int kk, u32 (&a)[4]) {
  a[0] = cvt_rn_x2<T>(acc[mt][2 * kk][0], acc[mt][2 * kk][1]);
  a[1] = cvt_rn_x2<T>(acc[mt][2 * kk][2], acc[mt][2 * kk][3]);
  a[2] = cvt_rn_x2<T>(acc[mt][2 * kk + 1][0], acc[mt][2 * kk + 1][1]);
  a[3] = cvt_rn_x2<T>(acc[mt][2 * kk + 1][2], acc[mt][2 * kk + 1][3]);
}

// 8-column tiles 4 kk .. 4 kk + 3 of m-tile mt as the (16, 32) e4m3 A
// operand of m16n8k32, its k positions holding the block's 32 keys in the
// order key(k) = 16 (k / 16) + 2 ((k % 16) / 4) + (k % 2) + 8 ((k % 4) / 2):
// in that order each thread's accumulators already sit where the A layout
// wants them (four consecutive k per register), so no value crosses threads.
// The other operand (V) must list its keys in the same order.
template <class T, int MT, int NT>
__device__ __forceinline__ void to_operand_a_k32(const float (&acc)[MT][NT][4], int mt, int kk, u32 (&a)[4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float(&lo)[4] = acc[mt][4 * kk + 2 * half];
    const float(&hi)[4] = acc[mt][4 * kk + 2 * half + 1];
    a[2 * half] = cvt_rn_x4<T>(lo[0], lo[1], hi[0], hi[1]);      // row g
    a[2 * half + 1] = cvt_rn_x4<T>(lo[2], lo[3], hi[2], hi[3]);  // row g + 8
  }
}

// The two elements of row half r (row g, or g + 8) of one 8-column tile,
// scaled and packed into one register of two T: an output's unit of store.
template <class T>
__device__ __forceinline__ u32 to_packed(const float (&tile)[4], int r, float scale) {
  return cvt_rn_x2<T>(tile[2 * r] * scale, tile[2 * r + 1] * scale);
}

// Across the four threads (a quad) that together hold one row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace cujit
