// The second pass of split-KV decode: merges the normalized parts of a
// packed row (one per split, attn_decode.cu) by their log-sum-exp, in split
// order, so a plan's result is the same bitwise on every run. One warp per
// packed row; each lane holds D / 32 columns.
#include "attention/decode/decode_params.h"
#include "attention/head_dims.h"
#include "common/ptx.cuh"

namespace cujit::decode {

template <int D, class T>
__global__ void __launch_bounds__(kDecodeCombineWarps * 32) attn_decode_combine(const __grid_constant__ DecodeCombineParams p) {
  static_assert(kDecodeHeadDims.contains(D), "D is one of kDecodeHeadDims");
  constexpr int kPerLane = D / 32;  // 2, 4 or 8 columns
  static_assert(kPerLane % 2 == 0, "columns go in pairs");
  const int lane = threadIdx.x % 32;
  const unsigned n = blockIdx.x * kDecodeCombineWarps + threadIdx.x / 32;  // packed row over (B, Hkv, rows)
  const unsigned total = unsigned(p.batch) * unsigned(p.heads_kv) * unsigned(p.rows);

  grid_dependency_wait();  // the parts
  if (n >= total) return;

  const unsigned batch_head = p.rows_div.quotient(n);
  const int r = int(n - batch_head * unsigned(p.rows));
  const int batch = int(p.heads_kv_div.quotient(batch_head));
  const int head_kv = int(batch_head) - batch * p.heads_kv;
  const int pos = int(p.group_div.quotient(unsigned(r)));
  const int head = head_kv * p.group + (r - pos * p.group);

  // Each lane holds the log-sum-exps of splits lane, lane + 32, ...: loaded at
  // once (plain loads, which the compiler may overlap), not one per step of
  // the accumulation below.
  constexpr int kMaxSplitsPerLane = (kMaxDecodeSplits + 31) / 32;
  const float neg_inf = -__int_as_float(0x7f800000);
  float lse2[kMaxSplitsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) {
    const int s = lane + 32 * i;
    lse2[i] = s < p.splits ? p.partial_lse2[i64(s) * total + n] : neg_inf;
  }
  float mx = neg_inf;
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) mx = fmaxf(mx, lse2[i]);
#pragma unroll
  for (int step = 16; step > 0; step /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, step));
  const float safe = mx == neg_inf ? 0.f : mx;  // no part saw a key: every weight is 0
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) {
    lse2[i] = ex2_approx(lse2[i] - safe);  // now the split's weight
    sum += lse2[i];
  }
#pragma unroll
  for (int step = 16; step > 0; step /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, step);

  // The parts in split order, four at a time so that their loads overlap.
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.f;
  const float* part = p.partial_o + i64(n) * D + lane * kPerLane;
  const i64 part_step = i64(total) * D;
  for (int s0 = 0; s0 < p.splits; s0 += 4) {
    float x[4][kPerLane], weight[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int s = min(s0 + j, p.splits - 1);  // past the end: weight 0 below
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) x[j][i] = part[s * part_step + i];
      float w = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxSplitsPerLane; ++i) {
        const float wi = __shfl_sync(0xffffffffu, lse2[i], s % 32);
        w = s / 32 == i ? wi : w;
      }
      weight[j] = s0 + j < p.splits ? w : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] = fmaf(weight[j], x[j][i], acc[i]);
  }
  const float inv = rcp_approx_or_zero(sum);
  char* dst = static_cast<char*>(p.o) +
              (batch * p.o_stride[0] + head * p.o_stride[1] + pos * p.o_stride[2] + lane * kPerLane) * 2;
#pragma unroll
  for (int i = 0; i < kPerLane; i += 2) {
    const u32 packed = cvt_rn_x2<T>(acc[i] * inv, acc[i + 1] * inv);
    asm volatile("st.global.b32 [%0], %1;\n" ::"l"(dst + i * 2), "r"(packed) : "memory");
  }
  if (p.lse != nullptr && lane == 0) {
    constexpr float kLn2 = 0.6931471805599453f;
    p.lse[(i64(batch) * p.heads_kv * p.group + head) * p.seq_q + pos] =
        sum == 0.f ? neg_inf : (mx + lg2_approx(sum)) * kLn2;
  }
}

}  // namespace cujit::decode
