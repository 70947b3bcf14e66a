// The compile-time facts of one sm90 variant that its roles (producer,
// mainloop, epilogue) share: warpgroups, accumulator tiles, element size,
// the shared-memory layout, and whether the softmax fits under P V.
#pragma once
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/smem_layout.h"
#include "common/types.cuh"

namespace cujit::sm90 {

// T: the output's type; TIN: q's, k's and v's (T, or e4m3).
// VT_STAGED_ (FP8): V comes transposed from the staging pass (v_stage.cu),
// loaded by TMA straight into the transposed ring; no warp transposes it.
// KV_CACHE_: the keys are a KV cache's, each sequence's count from
// Sm90AttnParams::seq_lens; PAGE_ > 0: in pages of PAGE_ keys through its
// block table, a page's rows a TMA box; PAGE_ = kGatheredRows: in pages of
// any size (Sm90AttnParams::page_divisor), each row copied by cp.async from
// its page (kv_loader.cuh).
template <int D_, int BM_, int BN_, int STAGES_, class T_, bool CAUSAL_, bool VARLEN_, class TIN_ = T_,
          bool VT_STAGED_ = false, bool KV_CACHE_ = false, int PAGE_ = 0>
struct KernelTraits {
  static constexpr int D = D_, BM = BM_, BN = BN_, STAGES = STAGES_;
  static constexpr bool CAUSAL = CAUSAL_;
  static constexpr bool VARLEN = VARLEN_;  // a ragged batch: tiles from AttnParams::varlen_tiles
  static constexpr bool KV_CACHE = KV_CACHE_;
  static constexpr int PAGE = PAGE_;
  static_assert(!KV_CACHE || !VARLEN, "a KV cache's chunk is a dense batch of per-sequence lengths");
  static constexpr bool kGathered = PAGE == kGatheredRows;
  static_assert(PAGE == 0 || (KV_CACHE && PAGE >= 8 && (BN % PAGE == 0 || PAGE % BN == 0)) ||
                    (KV_CACHE && kGathered && BN <= 128),
                "TMA pages of at least 8 keys (a box starts a 1,024-byte swizzle atom), a whole number a block "
                "or blocks a page; gathered rows: at most 32 a producer warp");
  // Arrivals that fill a K or V stage: the producer's (with TMA's bytes),
  // or one per producer thread as its gathered copies land.
  static constexpr unsigned kKvFills = kGathered ? 128 : 1;
  using T = T_;
  using TIN = TIN_;
  // FP8 inputs: V is transposed in shared memory by the producer warpgroup
  // (v_transposer.cuh), P is rounded to e4m3 for P V, and the descale
  // factors scale S and O.
  static constexpr bool kFp8 = same_type<TIN, e4m3>::value;
  static_assert(!KV_CACHE || !kFp8, "a KV cache's chunk: 16-bit q, K and V");
  static constexpr bool kVtStaged = VT_STAGED_;
  static_assert(!kVtStaged || (kFp8 && !VARLEN), "staged V: FP8 inputs, dense batches");
  static constexpr int kConsumers = BM / 64;  // warpgroups of 64 query rows
  static constexpr int kNT = BN / 8;          // 8-column accumulator tiles of S: (64, BN)
  static constexpr int kDT = D / 8;           // ... of O: (64, D)
  static constexpr int kElementBytes = element_traits<TIN>::bytes;    // of the inputs
  static constexpr int kOutBytes = element_traits<T>::bytes;
  static constexpr int kChunkColumns = chunk_columns(kElementBytes);  // input elements per 128-byte row
  static constexpr int kOutChunkColumns = chunk_columns(kOutBytes);   // output elements per 128-byte row
  static constexpr int kKStep = 32 / kElementBytes;                   // elements of one wgmma k-step (32 bytes)
  static constexpr int kKStepsPerRow = kChunkColumns / kKStep;
  // Consumers release a buffer once per warp; so do the transposer's warps.
  static constexpr unsigned kReleases = kConsumers * 4;
  static constexpr int kTransposerWarps = 3;  // warps 1-3 of the producer warpgroup

  CUJIT_HOST_DEVICE static constexpr SmemLayout layout() {
    return SmemLayout(D, BM, BN, STAGES, kElementBytes, kOutBytes);
  }
  static constexpr int kQBuffers = SmemLayout(D, BM, BN, STAGES, kElementBytes, kOutBytes).q_buffers;
  static constexpr bool kOInQ = SmemLayout(D, BM, BN, STAGES, kElementBytes, kOutBytes).o_in_q;  // O staged in Q's buffer

  // Whether a block's softmax can run while the warpgroup's P V of the block
  // before runs: S, that P V's operand P and its accumulator O are live at
  // once (fp32 S is BN / 2 registers, P BN / 4 in 16 bits or BN / 8 in
  // e4m3, O D / 2, plus ~40 for the rest, ~28 with e4m3 inputs: ptxas fits
  // D = 128, BN = 224 in the consumers' 232 without spilling). Where they do
  // not fit (three consumer warpgroups' 160 registers at larger tiles) ptxas
  // would spill or serialize the wgmma; there the P V finishes first.
  static constexpr bool kSoftmaxUnderPV =
      D / 2 + BN / 2 + BN * kElementBytes / 8 + (kFp8 ? 28 : 40) <= consumer_registers(BM, kFp8, D, kGathered);

  // Where O is rescaled by a block's softmax correction: inside the next
  // ping-pong turn, between issuing S = Q K^T and O += P V, so the multiplies
  // run under Q K^T; or after P V lands, ahead of the turn. Inside the turn
  // measured +1-4% with FP8 inputs at D = 128 (64 multiplies a thread); at
  // D = 256 (128 multiplies, which hold back the other warpgroups' turns)
  // and with 16-bit inputs, level within the runs' spread (docs/perf-log.md
  // "fp8 v7").
  static constexpr bool kRescaleInTurn = kFp8 && D == 128;
};

}  // namespace cujit::sm90
