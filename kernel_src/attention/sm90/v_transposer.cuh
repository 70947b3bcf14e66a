// FP8 inputs: 8-bit wgmma takes its B operand K-major only, so P V needs V
// as [D][BN] with the keys contiguous. Warps 1-3 of the producer warpgroup
// copy each V stage the TMA has landed ([BN][D], 128-byte swizzled chunks)
// into the transposed ring ([D][BN], one 128-byte swizzled chunk of keys),
// in the same order of key blocks as the producer. Within each 16 keys the
// copy follows to_operand_a_k32's order (column 4q + j holds key 2q + j % 2
// + 8 (j / 2)), the order in which the consumers' P sits in registers.
#pragma once
#include "attention/common/key_blocks.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace cujit::sm90 {

template <class Traits>
struct VTransposer {
  static constexpr int D = Traits::D, BN = Traits::BN;
  static_assert(Traits::kElementBytes == 1 && BN == kRowBytes, "bytes, one 128-byte chunk of keys per row");
  // A unit is 4 keys x 4 head-dim columns; a warp's 32 lanes take 4 key
  // groups x 4 column groups x 2 blocks of 16 keys per pass (both sides of
  // the copy then touch 16 banks per access: 2-way conflicts).
  static constexpr int kColumnPasses = D / 16;
  static constexpr int kPasses = kColumnPasses * (BN / 32);

  SharedBarriers<Traits> bars;
  u32 sV, sVt;  // stage 0 of the V ring and of the transposed ring
  int warp;     // 0 .. kTransposerWarps - 1
  int lane;

  __device__ __forceinline__ void run(const Sm90AttnParams& p) const {
    constexpr int BM = Traits::BM;
    int kv_iter = 0;
    for_each_tile<Traits::CAUSAL, Traits::VARLEN>(p, [&](int, const Tile& t) {
      const KeyBlockRange blocks =
          key_block_range(t.m_block * BM, BM, BN, t.seq_q, t.seq_k, Traits::CAUSAL, t.causal_offset);
      for (int n = 0; n < blocks.count; ++n, ++kv_iter) {
        const RingSlot<Traits::STAGES> slot = RingSlot<Traits::STAGES>::at(kv_iter);
        bars.v_full(slot.index).wait(slot.phase);
        bars.vt_empty(slot.index).wait(slot.phase ^ 1);
        transpose(slot.index);
        fence_proxy_async_shared();  // the consumers' wgmma reads it through the async proxy
        bars.v_empty(slot.index).release_by_warp(lane);
        bars.vt_full(slot.index).release_by_warp(lane);
      }
    });
  }

 private:
  __device__ __forceinline__ void transpose(int stage) const {
    constexpr SmemLayout L = Traits::layout();
    const u32 v = sV + stage * L.kv_bytes;
    const u32 vt = sVt + stage * L.kv_bytes;
    const int q = lane & 3;
    for (int pass = warp; pass < kPasses; pass += Traits::kTransposerWarps) {
      const int dg = (pass % kColumnPasses) * 4 + ((lane >> 2) & 3);  // columns 4 dg .. 4 dg + 3
      const int block16 = (pass / kColumnPasses) * 2 + (lane >> 4);  // keys 16 block16 ..
      const int column = 4 * dg % kRowBytes;
      const u32 v_chunk = v + (4 * dg / kRowBytes) * BN * kRowBytes;
      u32 w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = 16 * block16 + 2 * q + (j & 1) + 8 * (j >> 1);
        w[j] = ld_shared_b32(v_chunk + key * kRowBytes + swizzled(column, key));
      }
      // Byte i of w[j] -> byte j of out[i].
      const u32 t0 = byte_perm<0x5140>(w[0], w[1]), t1 = byte_perm<0x7362>(w[0], w[1]);
      const u32 t2 = byte_perm<0x5140>(w[2], w[3]), t3 = byte_perm<0x7362>(w[2], w[3]);
      const u32 out[4] = {byte_perm<0x5410>(t0, t2), byte_perm<0x7632>(t0, t2), byte_perm<0x5410>(t1, t3),
                          byte_perm<0x7632>(t1, t3)};
      const int key_column = 16 * block16 + 4 * q;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 4 * dg + i;
        st_shared_b32(vt + row * kRowBytes + swizzled(key_column, row), out[i]);
      }
    }
  }

  // Byte offset of column `column` within a 128-byte-swizzled row `row`.
  __device__ __forceinline__ static int swizzled(int column, int row) {
    return (((column >> 4) ^ (row & 7)) << 4) | (column & 15);
  }
};

}  // namespace cujit::sm90
