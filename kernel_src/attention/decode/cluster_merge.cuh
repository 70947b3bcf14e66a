// sm_90: split-KV decode's merge inside the kernel. The splits of one row
// block (two) form one cluster, a split's rank in it being its index
// (blockIdx.x % splits); each split merges some of the block's rows, adding
// the parts in split order, so a plan's result is the same bitwise on every
// run, as with the combine pass it replaces (attn_decode_combine.cu), minus
// that pass's launch, its wait for the whole grid and its trip through
// global memory.
//
// FP8 caches in blocks of 8 rows push: split r merges rows r, r + 2, ...
// Each CTA says when its K/V ring is free (a cluster arrive after its
// loop), sums its warps' parts of each row, waits for the other CTA's
// arrive, and stores each row's part and log2-sum-exp straight into the
// shared memory of the CTA that merges it, by st.async, whose bytes complete
// on that CTA's mbarrier. Each CTA waits on its own barrier for its rows'
// bytes, merges them from its own shared memory and leaves: no cluster
// barrier after the pushes, whose release (a GPU-wide memory barrier on
// sm_90a) cost ~0.25 us (docs/perf-log.md, "decode v15"). The arrive that
// frees the ring has no release either: only reads came before it. Pulling
// the parts instead (remote loads between two cluster barriers, below) cost
// the B=8 FP8 decode 0.9 us (docs/perf-log.md, "decode v12").
#pragma once
#include "attention/decode/decode_layout.h"
#include "attention/decode/decode_params.h"
#include "attention/decode/merged_store.cuh"
#include "attention/decode/tile_heads.cuh"
#include "common/ptx.cuh"
#include "common/ptx_cluster.cuh"
#include "common/ptx_sm90.cuh"

namespace cujit::decode {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static_assert(kMaxDecodeClusterSplits == 2, "a pushed part region holds two parts of half the rows");

// A merging CTA's part region (decode_cluster_part_bytes: BM * (D + 1)
// floats): [split][BM / 2][D] parts of the rows it merges (row / 2), then
// [split][BM / 2] log2-sum-exps. It overlaps the K/V ring, hence the arrive
// and wait around the stores.
template <int D, int BM>
struct ClusterParts {
  static_assert(BM % 2 == 0, "each split merges half the rows");
  static constexpr int kRows = BM / 2;
  static __device__ __forceinline__ u32 o(u32 part, int split, int row, int col) {
    return part + u32(((split * kRows + row / 2) * D + col) * 4);
  }
  static __device__ __forceinline__ u32 lse(u32 part, int split, int row) {
    return part + u32((2 * kRows * D + split * kRows + row / 2) * 4);
  }
};

// How many rows of the block that starts at packed row m0 the CTA of cluster
// rank `rank` merges: rows rank, rank + splits, ...
template <int BM, bool PAIRED>
__device__ __forceinline__ int rows_merged_by(const DecodeParams& p, int m0, int rank, int splits) {
  const int rows = min(BM, (PAIRED ? 2 * p.rows : p.rows) - m0);
  return rows > rank ? (rows - rank + splits - 1) / splits : 0;
}

// Before anything is waited for, by one thread of a CTA that merges in its
// cluster: its barrier, set to complete once both splits' parts of the rows
// it merges (row % 2 == split) have landed, each row's kHeadD columns and its
// log2-sum-exp. The other CTA pushes only after the cluster barrier that
// follows its loop, which the fence orders the barrier's set-up before.
template <int kHeadD, int BM, bool PAIRED>
__device__ __forceinline__ void expect_pushed_parts(const DecodeParams& p, u32 bar, int split, int m0) {
  // rows_merged_by(p, m0, split, 2), written out as in the machine code the
  // GPU suite ran: through the helper, ptxas schedules one sm_90a variant's
  // prologue differently.
  const int rows = min(BM, (PAIRED ? 2 * p.rows : p.rows) - m0);
  const int my_rows = rows > split ? (rows - split + 1) / 2 : 0;
  sm90::mbarrier_init(bar, 1);
  sm90::mbarrier_arrive_expect_tx(bar, u32(kMaxDecodeClusterSplits * my_rows * (kHeadD + 1) * 4));
  sm90::fence_mbarrier_init();
}

// Eight columns of block row `row`'s part (this CTA's split) and its
// log2-sum-exp (from the thread with column 0, `first`), into the part
// region of the CTA that merges the row, completing on its barrier `bar`.
// After cluster_wait().
template <int D, int BM>
__device__ __forceinline__ void push_cluster_part(u32 part, u32 bar, int split, int row, int col,
                                                  const float (&sum)[8], float lse2, bool first) {
  using Parts = ClusterParts<D, BM>;
  const u32 owner = u32(row % 2);
  const u32 dst = mapa_shared_cluster(Parts::o(part, split, row, col), owner);
  const u32 owner_bar = mapa_shared_cluster(bar, owner);
  st_async_v4_f32(dst, sum[0], sum[1], sum[2], sum[3], owner_bar);
  st_async_v4_f32(dst + 16, sum[4], sum[5], sum[6], sum[7], owner_bar);
  if (first) st_async_f32(mapa_shared_cluster(Parts::lse(part, split, row), owner), lse2, owner_bar);
}

// Four columns of block row `row` (its first column `col`), merged from the
// splits' parts and stored: each part weighed by exp2(its log2-sum-exp - the
// largest), added in split order. lse_of(s) and o_of(s, x) read split s's
// log2-sum-exp and its four columns; splits past `splits` (at most
// kSplits) are left out.
template <int D, int kSplits, class T, bool PAIRED, class LseOf, class OOf>
__device__ __forceinline__ void merge_part_columns(const DecodeParams& p, int splits, int batch, int head_kv, int m0,
                                                   int row, int col, LseOf lse_of, OOf o_of) {
  using Heads = TileHeads<PAIRED, D / 2>;
  const float neg_inf = -__int_as_float(0x7f800000);
  float lse2[kSplits];
  float mx = neg_inf;
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    lse2[s] = s < splits ? lse_of(s) : neg_inf;
    mx = fmaxf(mx, lse2[s]);
  }
  const float safe = mx == neg_inf ? 0.f : mx;  // no part saw a key: every weight is 0
  float sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    if (s < splits) {
      const float w = ex2_approx(lse2[s] - safe);
      float x[4];
      o_of(s, x);
      sum += w;
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = fmaf(w, x[i], acc[i]);
    }
  }
  if constexpr (PAIRED) {
    store_merged_columns<T>(p, batch, Heads::kv_head(p, head_kv, m0 + row), Heads::row_in_head(p, m0 + row),
                            Heads::column_in_head(col), acc, sum, mx);
  } else {
    store_merged_columns<T>(p, batch, head_kv, m0 + row, col, acc, sum, mx);
  }
}

// After this CTA's pushes: once its barrier says its rows' parts have all
// landed, its rows (split, split + 2, ...) merged from its own shared memory
// and stored. No CTA reads another's shared memory, and each waits for every
// byte pushed to it, so none waits for another to leave. m0: the block's
// first packed row. PAIRED: two KV heads of D / 2 a tile (tile_heads.cuh).
template <int D, int BM, int kThreads, class T, bool PAIRED>
__device__ __forceinline__ void merge_pushed_cluster_parts(const DecodeParams& p, u32 part, u32 bar, int split,
                                                           int m0, int batch, int head_kv) {
  using Parts = ClusterParts<D, BM>;
  constexpr int kChunks = D / 4;  // 4 columns per thread and row
  sm90::mbarrier_wait_cluster(bar, 0);  // every part of this CTA's rows is stored

  using Heads = TileHeads<PAIRED, D / 2>;
  const int my_rows = rows_merged_by<BM, PAIRED>(p, m0, split, kMaxDecodeClusterSplits);
  for (int idx = int(threadIdx.x); idx < my_rows * kChunks; idx += kThreads) {
    const int row = split + (idx / kChunks) * 2;
    const int col = (idx % kChunks) * 4;
    if (!Heads::owns(p, m0 + row, col)) continue;  // the other head's columns
    merge_part_columns<D, kMaxDecodeClusterSplits, T, PAIRED>(
        p, kMaxDecodeClusterSplits, batch, head_kv, m0, row, col,
        [&](int s) { return ld_shared_f32(Parts::lse(part, s, row)); },
        [&](int s, float (&x)[4]) { ld_shared_v4_f32(x, Parts::o(part, s, row, col)); });
  }
}

// The others pull: each CTA leaves its normalized part in its own region
// (decode_cluster_part_bytes: [BM][D] floats, then [BM] log2-sum-exps);
// after a cluster barrier CTA rank r merges rows r, r + splits, ... reading
// every rank's part through distributed shared memory, and a second barrier
// keeps each CTA until the others have read it. Pushed as above, sm_90a's
// ptxas spilled a causal paged 32-row variant at 255 registers (152 bytes)
// and two 16-bit 8-row ones at the 80 it chose itself (8 bytes).
template <int D, int BM>
struct PulledParts {
  static __device__ __forceinline__ u32 o(u32 part, int row, int col) { return part + u32((row * D + col) * 4); }
  static __device__ __forceinline__ u32 lse(u32 part, int row) { return part + u32((BM * D + row) * 4); }
};

// Eight columns of block row `row`'s part and its log2-sum-exp (from the
// thread with column 0, `first`), left in this CTA's own region.
template <int D, int BM>
__device__ __forceinline__ void leave_cluster_part(u32 part, int row, int col, const float (&sum)[8], float lse2,
                                                   bool first) {
  using Parts = PulledParts<D, BM>;
  const u32 dst = Parts::o(part, row, col);
  st_shared_v4_f32(dst, sum[0], sum[1], sum[2], sum[3]);
  st_shared_v4_f32(dst + 16, sum[4], sum[5], sum[6], sum[7]);
  if (first) st_shared_f32(Parts::lse(part, row), lse2);
}

// After every thread has left its part: the merge. m0: the block's first
// packed row.
template <int D, int BM, int kThreads, class T, bool PAIRED>
__device__ __forceinline__ void merge_pulled_cluster_parts(const DecodeParams& p, u32 part, int m0, int batch,
                                                           int head_kv) {
  using Parts = PulledParts<D, BM>;
  constexpr int kChunks = D / 4;  // 4 columns per thread and row
  cluster_sync();  // every rank's part is written

  const int rank = int(cluster_ctarank());
  const int splits = p.splits;
  using Heads = TileHeads<PAIRED, D / 2>;
  const int my_rows = rows_merged_by<BM, PAIRED>(p, m0, rank, splits);
  for (int idx = int(threadIdx.x); idx < my_rows * kChunks; idx += kThreads) {
    const int row = rank + (idx / kChunks) * splits;
    const int col = (idx % kChunks) * 4;
    if (!Heads::owns(p, m0 + row, col)) continue;  // the other head's columns
    const u32 lse_addr = Parts::lse(part, row);
    const u32 o_addr = Parts::o(part, row, col);
    merge_part_columns<D, kMaxDecodeClusterSplits, T, PAIRED>(
        p, splits, batch, head_kv, m0, row, col,
        [&](int s) { return ld_shared_cluster_f32(mapa_shared_cluster(lse_addr, u32(s))); },
        [&](int s, float (&x)[4]) { ld_shared_cluster_v4_f32(x, mapa_shared_cluster(o_addr, u32(s))); });
  }
  // No CTA leaves while another still reads its shared memory. Only reads
  // are waited for: no release, so no wait for this CTA's output stores.
  cluster_arrive_relaxed();
  cluster_wait();
}
#endif

}  // namespace cujit::decode
