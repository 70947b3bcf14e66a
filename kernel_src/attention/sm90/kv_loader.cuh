// How the producer brings K/V blocks into the ring: from dense [B, Hkv, Sk, D]
// tensors through TMA, one box of (chunk columns, BN) per chunk. The
// producer owns the protocol (which block, which stage, when); a loader only
// issues the copies that complete on the stage's "full" barrier, so a paged
// loader (block n -> its page) replaces this struct, not the producer.
#pragma once
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/pipeline.cuh"

namespace cujit::sm90 {

template <class Traits>
struct TmaKvLoader {
  const TmaDescriptor* k;
  const TmaDescriptor* v;
  u32 sK, sV;  // stage 0 of the K and V rings

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
