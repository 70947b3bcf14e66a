// sm_90: split-KV decode's merge inside the kernel. The splits of one row
// block form one cluster; each CTA has left its normalized part (BM, D) and
// its rows' log2-sum-exp in its own shared memory. After a cluster barrier,
// CTA rank r merges rows r, r + splits, ... of the block, reading every rank's
// part through distributed shared memory and adding them in rank order, so a
// plan's result is the same bitwise on every run, as with the combine pass it
// replaces (attn_decode_combine.cu), minus that pass's launch, its wait for
// the whole grid and its trip through global memory.
#pragma once
#include "attention/decode/decode_layout.h"
#include "attention/decode/decode_params.h"
#include "attention/decode/merged_store.cuh"
#include "attention/decode/tile_heads.cuh"
#include "common/ptx.cuh"
#include "common/ptx_cluster.cuh"

namespace cujit::decode {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// part: this CTA's part region (decode_cluster_part_bytes): [BM][D] floats,
// then [BM] log2-sum-exps. m0: the block's first packed row. PAIRED: two
// KV heads of D / 2 a tile (tile_heads.cuh).
template <int D, int BM, int kThreads, class T, bool PAIRED>
__device__ __forceinline__ void merge_cluster_parts(const DecodeParams& p, u32 part, int m0, int batch, int head_kv) {
  constexpr int kChunks = D / 4;  // 4 columns per thread and row
  const float neg_inf = -__int_as_float(0x7f800000);
  cluster_sync();  // every rank's part is written

  const int rank = int(cluster_ctarank());
  const int splits = p.splits;
  using Heads = TileHeads<PAIRED, D / 2>;
  const int rows = min(BM, (PAIRED ? 2 * p.rows : p.rows) - m0);
  const int my_rows = rows > rank ? (rows - rank + splits - 1) / splits : 0;
  for (int idx = int(threadIdx.x); idx < my_rows * kChunks; idx += kThreads) {
    const int row = rank + (idx / kChunks) * splits;
    const int col = (idx % kChunks) * 4;
    if (!Heads::owns(p, m0 + row, col)) continue;  // the other head's columns
    const u32 lse_addr = part + u32((BM * D + row) * 4);
    const u32 o_addr = part + u32((row * D + col) * 4);
    float lse2[kMaxDecodeClusterSplits];
    float mx = neg_inf;
#pragma unroll
    for (int s = 0; s < kMaxDecodeClusterSplits; ++s) {
      lse2[s] = s < splits ? ld_shared_cluster_f32(mapa_shared_cluster(lse_addr, u32(s))) : neg_inf;
      mx = fmaxf(mx, lse2[s]);
    }
    const float safe = mx == neg_inf ? 0.f : mx;  // no part saw a key: every weight is 0
    float sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < kMaxDecodeClusterSplits; ++s) {
      if (s < splits) {
        const float w = ex2_approx(lse2[s] - safe);
        float x[4];
        ld_shared_cluster_v4_f32(x, mapa_shared_cluster(o_addr, u32(s)));
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
  cluster_sync();  // no CTA leaves while another still reads its shared memory
}
#endif

}  // namespace cujit::decode
