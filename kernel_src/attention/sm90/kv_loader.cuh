// How the producer brings K/V blocks into the ring: from dense [B, Hkv, Sk, D]
// tensors through TMA, one box of (chunk columns, BN) per chunk. The
// producer owns the protocol (which block, which stage, when); a loader only
// issues the copies that complete on the stage's "full" barrier, so a paged
// loader (block n -> its page) replaces this struct, not the producer.
#pragma once
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/v_stage_params.h"

namespace cujit::sm90 {

template <class Traits>
struct TmaKvLoader {
  const TmaDescriptor* k;
  const TmaDescriptor* v;
  u32 sK, sV;  // stage 0 of the K and V rings
  u32 sVt;     // ... and of the transposed V ring (staged FP8 V)

  __device__ __forceinline__ void prefetch() const {
    prefetch_tensor_map(k);
    prefetch_tensor_map(v);
  }
  // The BN keys from row `first_key` of (head_kv, batch) into ring stage
  // `stage`.
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int first_key, int head_kv, int batch) const {
    load(k, sK, stage, full, first_key, head_kv, batch);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int first_key, int head_kv, int batch) const {
    load(v, sV, stage, full, first_key, head_kv, batch);
  }
  // Staged V (Traits::kVtStaged; `v` maps the staging as [rows][128 bytes]):
  // key block `block` of (head_kv, batch), one (128, D) box per chunk, into
  // stage `stage` of the transposed ring.
  __device__ __forceinline__ void load_vt(int stage, Mbarrier full, int block, int head_kv, int batch, int heads_kv,
                                          int blocks) const {
    constexpr SmemLayout L = Traits::layout();
    constexpr int kChunks = transposed_v_chunks(Traits::BN);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const long long row = v_stage_row(batch, head_kv, block, c, heads_kv, blocks, kChunks, Traits::D);
      tma_load_4d(sVt + stage * L.vt_bytes + c * Traits::D * kRowBytes, v, full.addr, 0, int(row), 0, 0);
    }
  }

 private:
  __device__ __forceinline__ static void load(const TmaDescriptor* map, u32 ring, int stage, Mbarrier full,
                                              int first_key, int head_kv, int batch) {
    constexpr SmemLayout L = Traits::layout();
#pragma unroll
    for (int c = 0; c < L.chunks; ++c)
      tma_load_4d(ring + stage * L.kv_bytes + c * Traits::BN * kRowBytes, map, full.addr, c * Traits::kChunkColumns,
                  first_key, head_kv, batch);
  }
};

}  // namespace cujit::sm90
