// The consumer mainloop: one warpgroup's 64 query rows against a tile's key
// blocks, last to first, as the producer loads them. Each step issues
// S = Q K^T for the next block and O += P V for this one in one ping-pong
// turn, then does the next block's softmax while P V runs; warpgroups take
// turns issuing, so one's softmax also hides under another's GEMMs. The
// first block has no P V before it and the last no S after it: the same
// steps, with one of the two GEMMs left out.
#pragma once
#include "attention/common/key_blocks.h"
#include "attention/common/mask.cuh"
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/wgmma_ops.cuh"

namespace cujit::sm90 {

template <class Traits>
struct Mainloop {
  using T = typename Traits::T;
  static constexpr int D = Traits::D, BM = Traits::BM, BN = Traits::BN, STAGES = Traits::STAGES;
  static constexpr int kNT = Traits::kNT, kDT = Traits::kDT;
  using Softmax = OnlineSoftmax<1, kNT, kDT>;
  using Scores = float[1][kNT][4];  // S, then P: (64, BN)
  using Output = float[1][kDT][4];  // O: (64, D)
  // P as wgmma A fragments: in T, 16 keys each, or in e4m3, 32 keys each
  // in to_operand_a_k32's key order (which the transposed V follows).
  static constexpr int kPSteps = BN / Traits::kKStep;
  using OperandP = u32[kPSteps][4];

  SharedBarriers<Traits> bars;
  u32 sK, sV;  // stage 0 of the K and V rings (FP8: of the transposed V ring)
  PingPong<Traits::kConsumers> turn;
  int warp, lane;

  // O (zeroed) and the softmax state accumulate the tile's key blocks, which
  // `blocks` counts (at least one). sQ_wg: this warpgroup's Q rows; m_wg: the
  // first of them, within its sequence, whose keys `keys` bounds; q_empty:
  // Q's buffer, released after the last S unless O is staged there. kv_iter:
  // the K/V ring's running counter.
  __device__ __forceinline__ void run(Output& o, Softmax& softmax, const KeyBlockRange& blocks, const KeyLimit& keys,
                                      u32 sQ_wg, int m_wg, Mbarrier q_empty, int& kv_iter) const {
    int n = blocks.count - 1;
    int stage = kv_iter % STAGES;
    u32 phase = (kv_iter / STAGES) & 1;
    Scores s;
    float correction[1][2];
    OperandP pa;
    filled(bars.k_full(stage), phase);
    issue<true, false>(s, o, pa, correction, sQ_wg, stage, stage);
    scores_landed<0>(s, stage, n, q_empty);
    softmax_step(s, softmax, correction, n, blocks.first_masked, keys, m_wg);  // O is still zero: no rescale
    to_operand_a(s, pa);
    if constexpr (Traits::KV_CACHE && !Traits::kGathered) zero_v_past_length(stage, phase, keys.seq_k - n * BN);

    for (--n; n >= 0; --n) {
      const int next_stage = (kv_iter + 1) % STAGES;
      const u32 next_phase = ((kv_iter + 1) / STAGES) & 1;
      filled(bars.k_full(next_stage), next_phase);
      filled(bars.pv_full(stage), phase);
      issue<true, true>(s, o, pa, correction, sQ_wg, next_stage, stage);
      scores_landed<1>(s, next_stage, n, q_empty);  // P V may still run
      if constexpr (Traits::kSoftmaxUnderPV) {
        // The softmax sits in both arms of the mask's branch, so that the
        // wait for P V below starts a block of its own: in one block with
        // the softmax, ptxas schedules that wait first and the softmax no
        // longer runs under P V. The fences keep the softmax before the wait
        // and the conversion of P (into registers the P V may still read)
        // after it.
        if (n >= blocks.first_masked) {
          mask(s, n, keys, m_wg);
          softmax.update_scores(s, correction);
          fence_accumulators(s[0]);
        } else {
          softmax.update_scores(s, correction);
          fence_accumulators(s[0]);
        }
        pv_landed(o);
        fence_accumulators(s[0]);
      } else {
        softmax_step(s, softmax, correction, n, blocks.first_masked, keys, m_wg);
        pv_landed(o);
      }
      bars.pv_empty(stage).release_by_warp(lane);
      if constexpr (!Traits::kRescaleInTurn) Softmax::rescale(o, correction);
      to_operand_a(s, pa);
      ++kv_iter;
      stage = next_stage;
      phase = next_phase;
    }

    filled(bars.pv_full(stage), phase);
    issue<false, true>(s, o, pa, correction, sQ_wg, stage, stage);
    pv_landed(o);
    bars.pv_empty(stage).release_by_warp(lane);
    ++kv_iter;
  }

 private:
  // A K/V stage's wait. Rows gathered by cp.async were written through the
  // generic proxy, which wgmma (the async proxy) sees only past a proxy fence.
  __device__ __forceinline__ static void filled(Mbarrier full, u32 phase) {
    full.wait(phase);
    if constexpr (Traits::kGathered) fence_proxy_async_shared();
  }

  // A KV cache holds anything past a sequence's length, NaN included, and a
  // paged block's last page may reach past it: those keys' probabilities
  // are 0, but 0 * NaN is NaN in P V. So each warpgroup zeroes the V rows of
  // the tile's last block (the first it multiplies) past the length before
  // its P V reads them; the others write the same zeros. Gathered rows need
  // none: a row past the length holds the last key's V (kv_loader.cuh).
  __device__ __forceinline__ void zero_v_past_length(int stage, u32 phase, int valid) const {
    if (valid >= BN) return;
    constexpr SmemLayout L = Traits::layout();
    constexpr int kUnitsPerRow = kRowBytes / 16;
    const int units = (BN - valid) * kUnitsPerRow;
    const u32 tail = sV + u32(stage * L.kv_bytes + valid * kRowBytes);
    bars.pv_full(stage).wait(phase);
#pragma unroll
    for (int c = 0; c < L.chunks; ++c) {
      for (int u = warp * 32 + lane; u < units; u += 128) {
        st_shared_v4_f32(tail + u32(c * BN * kRowBytes + u * 16), 0.f, 0.f, 0.f, 0.f);
      }
    }
    fence_proxy_async_shared();  // the zeros, before wgmma reads the stage
    warpgroup_sync<Traits::kConsumers>(turn.wg);
  }

  // One ping-pong turn: S = Q K^T from K stage qk_stage, O += P V from V
  // stage pv_stage, or one of them; a commit group each. Where the traits
  // say so, O is rescaled by the last softmax's correction inside the turn,
  // between the two issues, while Q K^T runs (see kRescaleInTurn).
  template <bool QK, bool PV>
  __device__ __forceinline__ void issue(Scores& s, Output& o, const OperandP& pa, const float (&correction)[1][2],
                                        u32 sQ_wg, int qk_stage, int pv_stage) const {
    constexpr bool kRescaleHere = PV && Traits::kRescaleInTurn;
    turn.wait();
    if constexpr (QK) fence_accumulators(s[0]);
    if constexpr (PV && !kRescaleHere) fence_accumulators(o[0]);
    if constexpr (QK || !kRescaleHere) wgmma_fence();
    if constexpr (QK) {
      issue_qk(s, sQ_wg, qk_stage);
      wgmma_commit_group();
    }
    if constexpr (PV) {
      if constexpr (kRescaleHere) {
        Softmax::rescale(o, correction);
        fence_accumulators(o[0]);
        wgmma_fence();
      }
      issue_pv(o, pa, pv_stage);
      wgmma_commit_group();
    }
    turn.pass();
  }

  // S = Q K^T: D/16 k-steps, 32 bytes apart inside a 128-byte row, then on
  // to the next chunk.
  __device__ __forceinline__ void issue_qk(Scores& s, u32 sQ_wg, int stage) const {
    constexpr SmemLayout L = Traits::layout();
    constexpr int kStepBytes = Traits::kKStep * Traits::kElementBytes;
#pragma unroll
    for (int kt = 0; kt < D / Traits::kKStep; ++kt) {
      const u32 k_offset = (kt % Traits::kKStepsPerRow) * kStepBytes;
      const int chunk = kt / Traits::kKStepsPerRow;
      const u64 desc_q = smem_descriptor_sw128(sQ_wg + chunk * BM * kRowBytes + k_offset, 16, 1024);
      const u64 desc_k = smem_descriptor_sw128(sK + stage * L.kv_bytes + chunk * BN * kRowBytes + k_offset, 16, 1024);
      Wgmma<BN, typename Traits::TIN>::ss(s[0], desc_q, desc_k, kt > 0 ? 1 : 0);
    }
  }

  // O += P V. 16-bit: V is MN-major (head dim contiguous); 16 keys per
  // k-step are 16 rows of every chunk, chunks BN rows apart. FP8: V
  // transposed, K-major ([BN / 128][D][128 keys]), as K is; 32 keys per
  // k-step, 32 bytes apart in its rows, then on to the next chunk of keys.
  __device__ __forceinline__ void issue_pv(Output& o, const OperandP& pa, int stage) const {
    constexpr SmemLayout L = Traits::layout();
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      if constexpr (Traits::kFp8) {
        constexpr int kStepsPerChunk = kRowBytes / 32;
        const u32 step = sV + stage * L.vt_bytes + (kk / kStepsPerChunk) * D * kRowBytes + (kk % kStepsPerChunk) * 32;
        const u64 desc_vt = smem_descriptor_sw128(step, 16, 1024);
        Wgmma<D, e4m3>::rs(o[0], pa[kk], desc_vt, 1);
      } else {
        const u64 desc_v = smem_descriptor_sw128(sV + stage * L.kv_bytes + kk * 16 * kRowBytes, BN * kRowBytes, 1024);
        Wgmma<D, T>::rs(o[0], pa[kk], desc_v, 1);
      }
    }
  }

  // S has landed (PENDING groups, the P V, may still run): K's stage is
  // free, and after the tile's last S so is Q's buffer, unless O goes there.
  template <int PENDING>
  __device__ __forceinline__ void scores_landed(Scores& s, int k_stage, int n, Mbarrier q_empty) const {
    wgmma_wait_group<PENDING>();
    fence_accumulators(s[0]);
    bars.k_empty(k_stage).release_by_warp(lane);
    if (n == 0) {
      if constexpr (!Traits::kOInQ) q_empty.release_by_warp(lane);
    }
  }

  __device__ __forceinline__ void pv_landed(Output& o) const {
    wgmma_wait_group<0>();
    fence_accumulators(o[0]);
  }

  __device__ __forceinline__ void mask(Scores& s, int n, const KeyLimit& keys, int m_wg) const {
    apply_mask<1, kNT, Traits::CAUSAL>(s, m_wg + warp * 16, n * BN, keys.seq_k, keys.causal_offset, lane);
  }

  // Block n's scores -> probabilities, masked where the block needs it.
  __device__ __forceinline__ void softmax_step(Scores& s, Softmax& softmax, float (&correction)[1][2], int n,
                                               int first_masked, const KeyLimit& keys, int m_wg) const {
    if (n >= first_masked) mask(s, n, keys, m_wg);
    softmax.update_scores(s, correction);
  }

  __device__ __forceinline__ static void to_operand_a(const Scores& s, OperandP& pa) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      if constexpr (Traits::kFp8) {
        cujit::to_operand_a_k32<e4m3>(s, 0, kk, pa[kk]);
      } else {
        cujit::to_operand_a<T>(s, 0, kk, pa[kk]);
      }
    }
  }
};

}  // namespace cujit::sm90
