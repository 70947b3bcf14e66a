// The decode kernel's warp tile for a block of at most 8 packed rows (BM = 8:
// a GQA group of up to 8 query heads, one new row each): the products turned
// around so that the keys are the MMA's 16 rows and the query rows its 8
// columns. S^T = K Q^T and O^T = V^T P^T then compute 8 padded rows where the
// row-major tile (S = Q K^T, 16 rows per m16n8k16) computes 16: half the
// mma.sync, half the exp2 and half O's rescale at GQA 4, none padded at
// GQA 8. Over an FP8 cache, whose decode is bound by each warp's instruction
// issue rather than by memory (docs/perf-log.md, "Decode over FP8 caches"),
// that is the saving; the conversions of K and V stay one per byte.
//
// Accumulator layouts (g = lane / 4, c = lane % 4):
//   s[mk]: keys 16 mk + g (elements 0, 1) and + 8 (2, 3), rows 2c and 2c + 1
//          (elements 0 / 2 and 1 / 3) of this warp's keys;
//   o[t]:  head-dim rows of tile t (ot_column below) g and g + 8, query rows
//          2c and 2c + 1 in the same element order.
#pragma once
#include "attention/common/register_tile.cuh"
#include "attention/common/smem_tile.cuh"
#include "common/ptx.cuh"

namespace cujit::decode {

// An 8x8 matrix of 16-bit values, one register per lane, transposed within
// the warp: lane (g, c)'s pair (row g, columns 2c, 2c + 1) becomes the pair
// (row g, columns 2c, 2c + 1) of the transpose.
__device__ __forceinline__ u32 movmatrix_trans(u32 x) {
  u32 r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

// Across the eight lanes that share c (they hold one query row's keys).
__device__ __forceinline__ float column_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
}
__device__ __forceinline__ float column_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  return x + __shfl_xor_sync(0xffffffffu, x, 16);
}

// The tiles' head-dim column of accumulator element e of o[t]. 16-bit cache:
// tile t holds columns 16 t .. 16 t + 15 in order. FP8: tile 2 q + odd holds
// the even (odd) columns of the 32 from 32 q, rows g -> 32 q + 2 g + odd and
// g + 8 -> 32 q + 16 + 2 g + odd (pv_block below).
template <bool kFp8>
__device__ __forceinline__ int ot_column(int t, int e, int lane) {
  const int g = lane / 4, high = e / 2;
  if constexpr (kFp8) return (t / 2) * 32 + 16 * high + 2 * g + t % 2;
  return t * 16 + 8 * high + g;
}

// Q's B fragments for all of D, kept in registers: q[kt] = {b0, b1} of
// head-dim step kt (rows g). FP8: step kt is K's 16-byte chunk kt, whose
// columns 4c .. 4c + 3 stand where the mma expects 2c, 2c + 1, 2c + 8, 2c + 9
// (the order K's fragments come in from ldmatrix on bytes).
template <int D, class TKV, class QTile>
__device__ __forceinline__ void load_q_columns(u32 (&q)[D / 16][2], u32 sQ, int lane) {
  if constexpr (is_fp8<TKV>::value) {
#pragma unroll
    for (int kt = 0; kt < D / 16; ++kt) ld_shared_v2_b32(q[kt][0], q[kt][1], sQ + QTile::offset(lane / 4, kt * 16 + 4 * (lane % 4)));
  } else {
#pragma unroll
    for (int kt2 = 0; kt2 < D / 32; ++kt2) {
      u32 r[4];
      ldmatrix_x4(r, sQ + QTile::offset(lane % 8, (2 * kt2 + lane / 16) * 16 + ((lane / 8) % 2) * 8));
      q[2 * kt2][0] = r[0];
      q[2 * kt2][1] = r[1];
      q[2 * kt2 + 1][0] = r[2];
      q[2 * kt2 + 1][1] = r[3];
    }
  }
}

// s[mk] += K (keys key0 + 16 mk ..) Q^T over all of D. A warp with one
// 16-key step a block (MK = 1) alternates the head-dim steps between s[0] and
// a second accumulator added in at the end: two chains of D / 32 dependent
// mma.sync instead of one of D / 16, which its softmax waits on (FP8 caches
// at D = 64 decoded 3% faster, docs/perf-log.md "decode v11"). With more
// steps the steps' chains are independent already, and a second accumulator
// each made ptxas spill at head dim 256 on sm_80.
template <int D, int MK, class T, class TKV, class KVTile>
__device__ __forceinline__ void score_block(float (&s)[MK][4], const u32 (&q)[D / 16][2], u32 k_stage, int key0,
                                            int lane) {
  constexpr bool kTwoChains = MK == 1;
  const int mi = lane / 8;
#pragma unroll
  for (int mk = 0; mk < MK; ++mk) {
    float odd[4] = {0.f, 0.f, 0.f, 0.f};
    float(&second)[4] = kTwoChains ? odd : s[mk];
    const int key = key0 + mk * 16 + (mi % 2) * 8 + lane % 8;
    if constexpr (is_fp8<TKV>::value) {
      // Per ldmatrix: keys 0-7 and 8-15 of two 16-byte chunks (two steps).
#pragma unroll
      for (int kt2 = 0; kt2 < D / 32; ++kt2) {
        u32 b[4], a[4], a2[4];
        ldmatrix_x4(b, k_stage + KVTile::offset(key, (2 * kt2 + mi / 2) * 16));
        cvt_fp8x4<TKV, T>(b[0], a[0], a[2]);
        cvt_fp8x4<TKV, T>(b[1], a[1], a[3]);
        cvt_fp8x4<TKV, T>(b[2], a2[0], a2[2]);
        cvt_fp8x4<TKV, T>(b[3], a2[1], a2[3]);
        mma_m16n8k16<T>(s[mk], a, q[2 * kt2][0], q[2 * kt2][1]);
        mma_m16n8k16<T>(second, a2, q[2 * kt2 + 1][0], q[2 * kt2 + 1][1]);
      }
    } else {
#pragma unroll
      for (int kt = 0; kt < D / 16; ++kt) {
        u32 a[4];
        ldmatrix_x4(a, k_stage + KVTile::offset(key0 + mk * 16 + (mi % 2) * 8 + lane % 8, kt * 16 + (mi / 2) * 8));
        mma_m16n8k16<T>(kt % 2 == 0 ? s[mk] : second, a, q[kt][0], q[kt][1]);
      }
    }
    if constexpr (kTwoChains) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mk][e] += odd[e];
    }
  }
}

// o^T += V^T P^T for this warp's keys key0 + 16 mk .., P^T from the scores'
// registers (each 8x8 quarter transposed in the warp into the B layout).
template <int D, int MK, class T, class TKV, class KVTile>
__device__ __forceinline__ void pv_block(float (&o)[D / 16][4], const float (&s)[MK][4], u32 v_stage, int key0,
                                         int lane) {
  const int mi = lane / 8;
#pragma unroll
  for (int mk = 0; mk < MK; ++mk) {
    const u32 b0 = movmatrix_trans(cvt_rn_x2<T>(s[mk][0], s[mk][1]));  // keys 2c, 2c + 1 of row g
    const u32 b1 = movmatrix_trans(cvt_rn_x2<T>(s[mk][2], s[mk][3]));  // keys 8 + 2c, 8 + 2c + 1
    if constexpr (is_fp8<TKV>::value) {
      // ldmatrix.trans of byte pairs, matrix j: keys 8 (j % 2) .., bytes
      // 32 dq + 16 (j / 2) ..; each register holds keys 2c, 2c + 1 at
      // columns 2g and 2g + 1 of its 16: the even column is the even tile's
      // A element, the odd one the odd tile's.
      const int key = key0 + mk * 16 + (mi % 2) * 8 + lane % 8;
#pragma unroll
      for (int dq = 0; dq < D / 32; ++dq) {
        u32 r[4], even[4], odd[4];
        ldmatrix_x4_trans(r, v_stage + KVTile::offset(key, dq * 32 + (mi / 2) * 16));
        cvt_fp8x4<TKV, T>(byte_perm<0x3120>(r[0]), even[0], odd[0]);  // keys 0-7, columns 0-15
        cvt_fp8x4<TKV, T>(byte_perm<0x3120>(r[2]), even[1], odd[1]);  // keys 0-7, columns 16-31
        cvt_fp8x4<TKV, T>(byte_perm<0x3120>(r[1]), even[2], odd[2]);  // keys 8-15, columns 0-15
        cvt_fp8x4<TKV, T>(byte_perm<0x3120>(r[3]), even[3], odd[3]);  // keys 8-15, columns 16-31
        mma_m16n8k16<T>(o[2 * dq], even, b0, b1);
        mma_m16n8k16<T>(o[2 * dq + 1], odd, b0, b1);
      }
    } else {
      // ldmatrix.trans, matrix j: keys 8 (j / 2) .., columns 16 t + 8 (j % 2) ..
      const int key = key0 + mk * 16 + (mi / 2) * 8 + lane % 8;
#pragma unroll
      for (int t = 0; t < D / 16; ++t) {
        u32 a[4];
        ldmatrix_x4_trans(a, v_stage + KVTile::offset(key, t * 16 + (mi % 2) * 8));
        mma_m16n8k16<T>(o[t], a, b0, b1);
      }
    }
  }
}

// Online softmax over the transposed scores: this thread's query rows 2c and
// 2c + 1 (r = 0, 1), their running max (raw scores) and partial sums, each
// with its own scale (two KV heads' descale factors in one block of rows:
// attn_decode.cu's PAIRED).
template <int MK, int OT>
struct KeysAsRowsSoftmax {
  float row_max[2];
  float row_sum[2];
  float scale_log2[2];

  __device__ __forceinline__ explicit KeysAsRowsSoftmax(const float (&scale)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      scale_log2[r] = scale[r];
      row_max[r] = -__int_as_float(0x7f800000);
      row_sum[r] = 0.f;
    }
  }

  // Scores in s become probabilities (unnormalized); o is rescaled.
  __device__ __forceinline__ void update(float (&s)[MK][4], float (&o)[OT][4]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_max[r];
#pragma unroll
      for (int mk = 0; mk < MK; ++mk) mx = fmaxf(mx, fmaxf(s[mk][r], s[mk][2 + r]));
      mx = column_max(mx);
      // A row with nothing visible yet keeps max -inf: offset 0, so that
      // exp2(-inf - 0) = 0 rather than NaN.
      const float m_scaled = mx == -__int_as_float(0x7f800000) ? 0.f : mx * scale_log2[r];
      const float correction = ex2_approx(row_max[r] * scale_log2[r] - m_scaled);
      row_max[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int mk = 0; mk < MK; ++mk) {
        s[mk][r] = ex2_approx(fmaf(s[mk][r], scale_log2[r], -m_scaled));
        s[mk][2 + r] = ex2_approx(fmaf(s[mk][2 + r], scale_log2[r], -m_scaled));
        sum += s[mk][r] + s[mk][2 + r];
      }
      row_sum[r] = row_sum[r] * correction + sum;
#pragma unroll
      for (int t = 0; t < OT; ++t) {
        o[t][r] *= correction;
        o[t][2 + r] *= correction;
      }
    }
  }

  // Row r's whole sum over the warp's keys; call once, after the last block.
  __device__ __forceinline__ float total_sum(int r) const { return column_sum(row_sum[r]); }
};

}  // namespace cujit::decode
