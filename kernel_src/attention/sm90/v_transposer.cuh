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
  // A pass moves 32 keys x 16 head-dim columns: ldmatrix.trans on byte
  // pairs gives each lane keys 2q, 2q+1 of four 8-key groups at columns 2g,
  // 2g+1 (g = lane / 4, q = lane % 4); one prmt per word sorts them into
  // the key order for column 2g and for 2g+1, which is the layout stmatrix
  // stores as rows 2g and 2g+1 of the transposed tile.
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
    const int matrix = lane / 8, row = lane % 8;
    for (int pass = warp; pass < kPasses; pass += Traits::kTransposerWarps) {
      const int first_column = (pass % kColumnPasses) * 16;  // head-dim columns first_column ..
      const int first_key = (pass / kColumnPasses) * 32;     // keys first_key ..
      // Matrix i: keys first_key + 8 i .. + 7, columns first_column .. + 15.
      const int key = first_key + 8 * matrix + row;
      const int column = first_column % kRowBytes;
      u32 w[4];
      ldmatrix_x4_trans(w, v + (first_column / kRowBytes) * BN * kRowBytes + key * kRowBytes + swizzled(column, key));
      // Keys {2q, 2q+1, 8+2q, 9+2q} (and 16 on) of column 2g, then of 2g+1.
      const u32 out[4] = {byte_perm<0x6420>(w[0], w[1]), byte_perm<0x7531>(w[0], w[1]), byte_perm<0x6420>(w[2], w[3]),
                          byte_perm<0x7531>(w[2], w[3])};
      // Matrix m: transposed rows first_column + 2 r + m % 2, keys first_key + 16 (m / 2) ..
      const int out_row = first_column + 2 * row + (matrix & 1);
      stmatrix_x4(vt + out_row * kRowBytes + swizzled(first_key + 16 * (matrix >> 1), out_row), out);
    }
  }

  // Byte offset of column `column` within a 128-byte-swizzled row `row`.
  __device__ __forceinline__ static int swizzled(int column, int row) {
    return (((column >> 4) ^ (row & 7)) << 4) | (column & 15);
  }
};

}  // namespace cujit::sm90
