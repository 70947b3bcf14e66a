// The producer (one thread of warpgroup 0; its first warp where the loader
// looks pages up a lane each, all four where they gather rows): for each of
// the CTA's tiles, Q into its buffer, then the tile's key blocks last to
// first (the masked ones first) into the K/V ring once the consumers have
// released the buffer ("empty"), the loader completing its "full" barrier.
// Staged FP8 V goes into the transposed ring instead of the V ring.
#pragma once
#include "attention/common/key_blocks.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace cujit::sm90 {

template <class Traits, class KvLoader>
__device__ __forceinline__ void produce(const Sm90AttnParams& p, const SharedBarriers<Traits>& bars, u32 sQ,
                                        const KvLoader& kv) {
  constexpr SmemLayout L = Traits::layout();
  constexpr int BM = Traits::BM, BN = Traits::BN;
  const AttnParams& a = p.attn;  // group only: a tile's bounds are its own
  prefetch_tensor_map(&p.q);
  kv.prefetch();
  int kv_iter = 0;
  for_each_tile<Traits::CAUSAL, Traits::VARLEN, Traits::KV_CACHE>(p, [&](int tile_iter, const Tile& t) {
    const RingSlot<Traits::kQBuffers> q = RingSlot<Traits::kQBuffers>::at(tile_iter);
    const int m0 = t.m_block * BM;
    const int head_kv = t.head / a.group;
    const KeyBlockRange blocks = key_block_range(m0, BM, BN, t.seq_q, t.seq_k, Traits::CAUSAL, t.causal_offset);

    // Q: one (chunk columns, 64) box per chunk and consumer warpgroup.
    bars.q_empty(q.index).wait(q.phase ^ 1);
    if (kv.leader()) {
      bars.q_full(q.index).arrive_expect_tx(L.q_bytes);
#pragma unroll
      for (int c = 0; c < L.chunks; ++c)
#pragma unroll
        for (int w = 0; w < Traits::kConsumers; ++w)
          tma_load_4d(sQ + q.index * L.q_bytes + (c * BM + w * 64) * kRowBytes, &p.q, bars.q_full(q.index).addr,
                      c * Traits::kChunkColumns, t.q_row + m0 + w * 64, t.head, t.batch);
    }

    // Key blocks go last to first: the masked ones come first.
    for (int n = blocks.count - 1; n >= 0; --n, ++kv_iter) {
      const RingSlot<Traits::STAGES> kv_slot = RingSlot<Traits::STAGES>::at(kv_iter);
      const typename KvLoader::Block block = kv.block(t.k_row + n * BN, t.batch, t.seq_k);
      bars.k_empty(kv_slot.index).wait(kv_slot.phase ^ 1);
      kv.load_k(kv_slot.index, bars.k_full(kv_slot.index), t.k_row + n * BN, block, head_kv, t.batch);
      if constexpr (Traits::kVtStaged) {
        bars.vt_empty(kv_slot.index).wait(kv_slot.phase ^ 1);
        bars.vt_full(kv_slot.index).arrive_expect_tx(L.vt_bytes);
        kv.load_vt(kv_slot.index, bars.vt_full(kv_slot.index), n, head_kv, t.batch, a.heads_kv, p.vt_blocks);
      } else {
        bars.v_empty(kv_slot.index).wait(kv_slot.phase ^ 1);
        kv.load_v(kv_slot.index, bars.v_full(kv_slot.index), t.k_row + n * BN, block, head_kv, t.batch);
      }
    }
  });
  kv.drain();
}

}  // namespace cujit::sm90
