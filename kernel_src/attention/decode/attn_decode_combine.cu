// The second pass of split-KV decode: merges the normalized parts of a
// packed row (one per split, attn_decode.cu) by their log-sum-exp, so a
// plan's result is the same bitwise on every run.
//
// One CTA per packed row. Its threads load every split's log-sum-exp at once
// and turn them into weights in shared memory; then groups of D / 4 threads
// (4 columns each) take the splits side by side (group g: splits g, g + G,
// ...), each thread issuing up to kLoadsInFlight part loads before it uses
// one (the first ones before the log-sum-exps are reduced), and group 0 adds
// the groups' sums in group order. So the pass costs about one load's trip
// for up to 32 splits at D = 128 (64 at D = 64): one warp walking
// a row's splits in sequence took 20 us for 32 splits (MQA, 128 rows).
#include "attention/decode/decode_params.h"
#include "attention/decode/merged_store.cuh"
#include "attention/head_dims.h"
#include "common/ptx.cuh"

namespace cujit::decode {

// Deterministic CTA-wide reductions: a fixed shuffle tree in each warp, then
// the warps' results in warp order.
template <class Op>
__device__ __forceinline__ float block_reduce(float x, float* scratch, Op op) {
  constexpr int kWarps = kDecodeCombineThreads / 32;
#pragma unroll
  for (int step = 16; step > 0; step /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, step));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float all = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) all = op(all, scratch[w]);
  __syncthreads();  // scratch is reused
  return all;
}

template <int D, class T>
__global__ void __launch_bounds__(kDecodeCombineThreads) attn_decode_combine(const __grid_constant__ DecodeCombineParams p) {
  static_assert(kDecodeHeadDims.contains(D), "D is one of kDecodeHeadDims");
  constexpr int kLanes = D / 4;  // threads per part row, 4 columns each
  static_assert(kDecodeCombineThreads % kLanes == 0, "the threads form whole groups");
  constexpr int kGroups = kDecodeCombineThreads / kLanes;
  static_assert(kMaxDecodeSplits % kDecodeCombineThreads == 0, "each thread loads whole log-sum-exps");
  constexpr int kLsePerThread = kMaxDecodeSplits / kDecodeCombineThreads;
  constexpr int kLoadsInFlight = 8;

  __shared__ float weight[kMaxDecodeSplits];
  __shared__ float scratch[kDecodeCombineThreads / 32];
  __shared__ float4 group_sum[kGroups > 1 ? kGroups - 1 : 1][kLanes];

  const int tid = threadIdx.x;
  const unsigned n = blockIdx.x;  // packed row over (B, Hkv, rows); the grid has exactly one CTA each
  const unsigned total = unsigned(p.batch) * unsigned(p.heads_kv) * unsigned(p.rows);
  const float neg_inf = -__int_as_float(0x7f800000);

  grid_dependency_wait();  // the parts

  // The first kLoadsInFlight parts of this thread's splits are loaded before
  // the log-sum-exps are reduced: they do not depend on them, so both loads
  // are one trip to L2 (for up to kLoadsInFlight * kGroups splits, all).
  const int group = tid / kLanes;
  const int lane = tid % kLanes;
  const float* part = p.partial_o + i64(n) * D + lane * 4;
  const i64 part_step = i64(total) * D;
  auto load_parts = [&](float4 (&x)[kLoadsInFlight], int s0) {
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) {
      const int s = min(s0 + j * kGroups, p.splits - 1);  // past the end: left out below
      x[j] = __ldcg(reinterpret_cast<const float4*>(part + s * part_step));
    }
  };
  float4 x[kLoadsInFlight];
  load_parts(x, group);

  float lse2[kLsePerThread];
#pragma unroll
  for (int i = 0; i < kLsePerThread; ++i) {
    const int s = tid + kDecodeCombineThreads * i;
    lse2[i] = s < p.splits ? __ldcg(p.partial_lse2 + i64(s) * total + n) : neg_inf;
  }
  float mx = lse2[0];
#pragma unroll
  for (int i = 1; i < kLsePerThread; ++i) mx = fmaxf(mx, lse2[i]);
  mx = block_reduce(mx, scratch, [](float a, float b) { return fmaxf(a, b); });
  const float safe = mx == neg_inf ? 0.f : mx;  // no part saw a key: every weight is 0
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kLsePerThread; ++i) {
    const int s = tid + kDecodeCombineThreads * i;
    const float w = ex2_approx(lse2[i] - safe);
    if (s < p.splits) weight[s] = w;
    sum += w;
  }
  sum = block_reduce(sum, scratch, [](float a, float b) { return a + b; });  // its barriers publish `weight`

  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = group;;) {
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) {
      const int s = s0 + j * kGroups;
      if (s < p.splits) {  // a select: a clamped load's part is left out, not multiplied by 0 (inf * 0 is NaN)
        const float w = weight[s];
        acc.x = fmaf(w, x[j].x, acc.x);
        acc.y = fmaf(w, x[j].y, acc.y);
        acc.z = fmaf(w, x[j].z, acc.z);
        acc.w = fmaf(w, x[j].w, acc.w);
      }
    }
    s0 += kLoadsInFlight * kGroups;
    if (s0 >= p.splits) break;
    load_parts(x, s0);
  }
  if (group > 0) group_sum[group - 1][lane] = acc;
  __syncthreads();
  if (group != 0) return;
#pragma unroll
  for (int g = 1; g < kGroups; ++g) {
    const float4 y = group_sum[g - 1][lane];
    acc.x += y.x;
    acc.y += y.y;
    acc.z += y.z;
    acc.w += y.w;
  }

  const unsigned batch_head = p.rows_div.quotient(n);
  const int r = int(n - batch_head * unsigned(p.rows));
  const int batch = int(p.heads_kv_div.quotient(batch_head));
  const int head_kv = int(batch_head) - batch * p.heads_kv;
  store_merged_columns<T>(p, batch, head_kv, r, lane * 4, {acc.x, acc.y, acc.z, acc.w}, sum, mx);
}

}  // namespace cujit::decode
