// Hopper flash-attention forward (FlashAttention-3 structure) for sm_90a.
//
// One persistent CTA per SM (two with BM = 64) walks a static list of
// (batch, head, m-block) tiles (tile_scheduler.cuh). Warpgroup 0 is the
// producer: one thread (a warp over a paged cache, whose lanes look up a
// block's pages together) issues TMA loads of Q and of K/V blocks into a
// STAGES-deep ring, each completing on an mbarrier with a transaction count
// (producer.cuh, kv_loader.cuh, pipeline.cuh); over small pages the
// warpgroup copies K/V rows by cp.async instead. Warpgroups 1..BM/64 are
// consumers, each owning 64 query rows: S = Q K^T on wgmma with both operands
// in shared memory, online softmax in registers, O += P V on wgmma with P
// from registers (mainloop.cuh). The epilogue stages O in shared memory and
// writes it with a TMA store (epilogue.cuh). docs/sm90-family.md describes
// the protocol between the warpgroups.
//
// FP8 (TIN = e4m3, out in T): the same with 8-bit wgmma (k = 32). Its B
// operand must be K-major, so warps 1-3 of the producer warpgroup transpose
// each V stage into a ring of its own (v_transposer.cuh); P goes to e4m3 in
// registers in the key order that transposed V follows; the descale factors
// of (batch, KV head) scale the softmax (q, k) and the output (v).
#include "attention/common/key_blocks.h"
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/head_dims.h"
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/epilogue.cuh"
#include "attention/sm90/kernel_traits.cuh"
#include "attention/sm90/kv_loader.cuh"
#include "attention/sm90/mainloop.cuh"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/producer.cuh"
#include "attention/sm90/smem_layout.h"
#include "attention/sm90/tile_scheduler.cuh"
#include "attention/sm90/v_transposer.cuh"
#include "common/ptx_sm90.cuh"

namespace cujit::sm90 {

// VARLEN: a ragged batch, its tiles from the prepare step (attention/varlen/).
// TIN: q's, k's and v's type (T, or e4m3). VT_STAGED (FP8, dense): V comes
// transposed from the staging pass (v_stage.cu), and the producer loads it
// into the transposed ring by TMA: the transposer's warps have no work.
// KV_CACHE: a chunk of query rows over a KV cache, each sequence's keys its
// length (Sm90AttnParams::seq_lens); PAGE > 0: the cache in pages of PAGE
// keys, loaded by page (kv_loader.cuh). Both left out of the other
// variants' names.
template <int D, int BM, int BN, int STAGES, class T, bool CAUSAL, bool VARLEN, class TIN, bool VT_STAGED,
          bool KV_CACHE = false, int PAGE = 0>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, ctas_per_sm(BM))
    attn_fwd_sm90(const __grid_constant__ Sm90AttnParams p) {
  static_assert(same_type<T, f16>::value || same_type<T, bf16>::value, "T is f16 or bf16");
  static_assert(kSm90HeadDims.contains(D), "D is one of kSm90HeadDims: 64, 128 or 256");
  static_assert(BM == 64 || BM == 128 || BM == 192, "one to three consumer warpgroups of 64 rows");
  static_assert(BN % 16 == 0 && BN <= 256, "BN is a multiple of 16 (the k-step of P V), at most 256");
  static_assert(STAGES >= 2, "the K/V ring needs at least two stages");
  using Traits = KernelTraits<D, BM, BN, STAGES, T, CAUSAL, VARLEN, TIN, VT_STAGED, KV_CACHE, PAGE>;
  static_assert(same_type<TIN, T>::value || (Traits::kFp8 && BM != 64 && D != 64),
                "FP8 inputs: two or three consumer warpgroups, D of whole 128-byte chunks");
  constexpr SmemLayout L = Traits::layout();
  static_assert(L.bytes <= smem_budget(BM), "tile does not fit in shared memory");
  static_assert(D % Traits::kChunkColumns == 0, "D is whole 128-byte chunks");

  extern __shared__ unsigned char smem_raw[];
  const u32 base = (smem_addr(smem_raw) + kSmemAlign - 1) & ~u32(kSmemAlign - 1);
  const u32 sQ = base + L.q;  // (BM, D) per Q buffer
  const u32 sK = base + L.k;  // (BN, D) per stage
  const u32 sV = base + L.v;  // (BN, D) per stage
  const u32 sVt = base + L.vt;  // FP8: (D, BN) per stage
  const u32 sO = base + L.o;  // (BM, D)
  const SharedBarriers<Traits> bars{base + L.barriers};
  if (threadIdx.x == 0) bars.init();
  __syncthreads();

  const AttnParams& a = p.attn;
  // Through a shuffle, so that the compiler knows it is the same on every
  // lane of a warp: from threadIdx.x alone it cannot, and it guards the
  // .aligned instructions (wgmma, setmaxnreg, named barriers) that follow a
  // branch on it with code for warps that might have diverged.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);

  // The split fits the launch's allocation by construction (smem_layout.h).
  if (warpgroup == 0) {
    setmaxnreg_dec<producer_registers(BM, Traits::kFp8, D, Traits::kGathered)>();
    // Before thread 0 leaves its warp for the producer loop: a shuffle needs
    // every lane.
    const int producer_warp = __shfl_sync(0xffffffffu, int(threadIdx.x / 32), 0);
    // The transposer's warps first: with the producer thread's branch
    // ahead of it, ptxas keeps both loops' state live at once and spills at
    // 24 registers (D = 256).
    if constexpr (Traits::kFp8 && !Traits::kVtStaged) {
      if (producer_warp > 0) {
        VTransposer<Traits>{bars, sV, sVt, producer_warp - 1, int(threadIdx.x % 32)}.run(p);
        return;
      }
    }
    if constexpr (Traits::kGathered) {
      produce(p, bars, sQ, GatheredKvLoader<Traits>{p, sK, sV, producer_warp, int(threadIdx.x % 32)});
    } else if constexpr (PAGE > 0) {
      if (producer_warp == 0) {
        produce(p, bars, sQ,
                PagedTmaKvLoader<Traits>{&p.k, &p.v, sK, sV, p.block_table, p.table_stride, p.num_pages,
                                         int(threadIdx.x % 32)});
      }
    } else if (threadIdx.x == 0) {
      produce(p, bars, sQ, TmaKvLoader<Traits>{&p.k, &p.v, sK, sV, sVt});
    }
    return;
  }

  // ------------------------------------------------------------ consumers
  setmaxnreg_inc<consumer_registers(BM, Traits::kFp8, D, Traits::kGathered)>();
  const int wg = warpgroup - 1;
  const int thread = threadIdx.x % 128;
  const int warp = thread / 32;
  const int lane = thread % 32;
  const Mainloop<Traits> mainloop{bars, sK, Traits::kFp8 ? sVt : sV, {wg}, warp, lane};
  const TmaEpilogue<Traits> epilogue{sO + wg * 64 * kRowBytes, wg, thread, warp, lane};
  mainloop.turn.start();

  int kv_iter = 0;
  for_each_tile<CAUSAL, VARLEN, KV_CACHE>(p, [&](int tile_iter, const Tile& t) {
    const RingSlot<Traits::kQBuffers> q = RingSlot<Traits::kQBuffers>::at(tile_iter);
    const u32 sQ_wg = sQ + q.index * L.q_bytes + wg * 64 * kRowBytes;  // this warpgroup's 64 rows of chunk 0
    const int m0 = t.m_block * BM;
    const int m_wg = m0 + wg * 64;
    const KeyBlockRange blocks = key_block_range(m0, BM, BN, t.seq_q, t.seq_k, CAUSAL, t.causal_offset);

    float o[1][Traits::kDT][4];  // (64, D)
    zero(o);
    // FP8: the scores' and the output's factors of this (sequence, KV head).
    float scale_log2 = a.scale_log2, out_scale = 1.f;
    if constexpr (Traits::kFp8) {
      const i64 at = t.sequence * a.descale_stride[0] + (t.head / a.group) * a.descale_stride[1];
      scale_log2 *= a.q_descale[at] * a.k_descale[at];
      out_scale = a.v_descale[at];
    }
    typename Mainloop<Traits>::Softmax softmax(scale_log2);

    bars.q_full(q.index).wait(q.phase);
    // Q's buffer is free once the last S = Q K^T is done (in the mainloop),
    // unless O is staged there: then once the store has read it.
    if (blocks.count > 0) {
      mainloop.run(o, softmax, blocks, {t.seq_k, t.causal_offset}, sQ_wg, m_wg, bars.q_empty(q.index), kv_iter);
    } else if constexpr (!Traits::kOInQ) {
      bars.q_empty(q.index).release_by_warp(lane);
    }
    epilogue.store(o, softmax, out_scale, p, t, m_wg);
    if constexpr (Traits::kOInQ) {
      epilogue.wait_store_read();
      bars.q_empty(q.index).release_by_warp(lane);
    }
  });
  epilogue.finish();
}

}  // namespace cujit::sm90
