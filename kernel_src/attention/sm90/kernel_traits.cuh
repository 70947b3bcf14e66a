// The compile-time facts of one sm90 variant that its roles (producer,
// mainloop, epilogue) share: warpgroups, accumulator tiles, element size,
// the shared-memory layout, and whether the softmax fits under P V.
#pragma once
#include "attention/sm90/smem_layout.h"
#include "common/types.cuh"

namespace cujit::sm90 {

template <int D_, int BM_, int BN_, int STAGES_, class T_, bool CAUSAL_, bool VARLEN_>
struct KernelTraits {
  static constexpr int D = D_, BM = BM_, BN = BN_, STAGES = STAGES_;
  static constexpr bool CAUSAL = CAUSAL_;
  static constexpr bool VARLEN = VARLEN_;  // a ragged batch: tiles from AttnParams::varlen_tiles
  using T = T_;
  static constexpr int kConsumers = BM / 64;  // warpgroups of 64 query rows
  static constexpr int kNT = BN / 8;          // 8-column accumulator tiles of S: (64, BN)
  static constexpr int kDT = D / 8;           // ... of O: (64, D)
  static constexpr int kElementBytes = element_traits<T>::bytes;
  static constexpr int kChunkColumns = chunk_columns(kElementBytes);  // elements per 128-byte row
  static constexpr int kKStep = 16;                                   // elements of one wgmma k-step (16-bit)
  static constexpr int kKStepsPerRow = kChunkColumns / kKStep;
  // Consumers release a buffer once per warp.
  static constexpr unsigned kReleases = kConsumers * 4;

  CUJIT_HOST_DEVICE static constexpr SmemLayout layout() { return SmemLayout(D, BM, BN, STAGES, kElementBytes); }
  static constexpr int kQBuffers = SmemLayout(D, BM, BN, STAGES, kElementBytes).q_buffers;
  static constexpr bool kOInQ = SmemLayout(D, BM, BN, STAGES, kElementBytes).o_in_q;  // O staged in Q's buffer

  // Whether a block's softmax can run while the warpgroup's P V of the block
  // before runs: S, that P V's operand P and its accumulator O are live at
  // once (fp32 S is BN / 2 registers, P BN / 4, O D / 2, plus ~40 for the
  // rest). Where they do not fit (three consumer warpgroups' 160 registers at
  // larger tiles) ptxas would spill or serialize the wgmma; there the P V
  // finishes first.
  static constexpr bool kSoftmaxUnderPV = D / 2 + BN / 2 + BN / 4 + 40 <= consumer_registers(BM);
};

}  // namespace cujit::sm90
