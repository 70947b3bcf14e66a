// FP8 inputs: 8-bit wgmma takes its B operand K-major only, so P V needs V
// as [D][BN] with the keys contiguous. Warps 1-3 of the producer warpgroup
// copy each V stage the TMA has landed ([BN][D], 128-byte swizzled chunks)
// into the transposed ring ([BN / 128][D][128]: 128-byte swizzled chunks
// of 128 keys, the last one partly used where BN is not a multiple of 128),
// in the same order of key blocks as the producer. Within each 16 keys the
// copy follows to_operand_a_k32's order (column 4q + j holds key 2q + j % 2
// + 8 (j / 2)), the order in which the consumers' P sits in registers.
// Within each 16 head-dim columns, column 2r + j becomes transposed row
// r + 8j, so P V's output columns come out in that order too: the epilogue
// (TmaEpilogue::store) puts them back.
#pragma once
#include "attention/common/key_blocks.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace cujit::sm90 {

template <class Traits>
struct VTransposer {
  static constexpr int D = Traits::D, BN = Traits::BN;
  static_assert(Traits::kElementBytes == 1 && BN % 32 == 0, "bytes, whole passes of 32 keys");
  // A pass moves 32 keys x 16 head-dim columns: ldmatrix.trans on byte
  // pairs gives each lane keys 2q, 2q+1 of four 8-key groups at columns 2g,
  // 2g+1 (g = lane / 4, q = lane % 4); one prmt per word sorts them into
  // the key order for column 2g and for 2g+1, which is the layout stmatrix
  // stores as rows 2g and 2g+1 of the transposed tile. A warp's unit of work
  // is four passes (32 keys x 64 columns) whose latencies overlap: all four
  // loaded before any is stored where the producer warpgroup has 40
  // registers (D = 128, smem_layout.h); in its 24 (D = 256), two ahead.
  static constexpr int kPassesPerUnit = 4;
  static constexpr int kLoadsAhead = transposer_loads_four_ahead(D) ? kPassesPerUnit : 2;
  static constexpr int kColumnUnits = D / (16 * kPassesPerUnit);
  static constexpr int kUnitBytes = 16 * kPassesPerUnit;  // of a 128-byte chunk row of V
  static constexpr int kUnitsPerChunk = kRowBytes / kUnitBytes;
  static constexpr int kUnits = kColumnUnits * (BN / 32);
  SharedBarriers<Traits> bars;
  u32 sV, sVt;  // stage 0 of the V ring and of the transposed ring
  int warp;     // 0 .. kTransposerWarps - 1
  int lane;

  __device__ __forceinline__ void run(const Sm90AttnParams& p) const {
    constexpr int BM = Traits::BM;
    int kv_iter = 0;
    for_each_tile<Traits::CAUSAL, Traits::VARLEN, Traits::KV_CACHE>(p, [&](int, const Tile& t) {
      const KeyBlockRange blocks =
          key_block_range(t.m_block * BM, BM, BN, t.seq_q, t.seq_k, Traits::CAUSAL, t.causal_offset);
      for (const int end = kv_iter + blocks.count; kv_iter < end; ++kv_iter) {
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
  // Every address is a lane's base, a unit's offset and a pass's constant:
  // the 128-byte swizzle XORs a row's 16-byte units with the row's index
  // mod 8, which for ldmatrix is the lane's row (keys start at multiples of
  // 8) and for stmatrix the lane's transposed row (head-dim columns start at
  // multiples of 16), so both swizzles fold into the lane's base, and a
  // pass's column (key) offset within a row is an XOR with a constant.
  __device__ __forceinline__ void transpose(int stage) const {
    constexpr SmemLayout L = Traits::layout();
    const int matrix = lane / 8, row = lane % 8;
    // ldmatrix: matrix i is keys 8 i .. 8 i + 7 of the pass; this lane gives
    // the address of key 8 i + row, swizzled for 16-byte unit 0.
    const u32 ld_lane = sV + stage * L.kv_bytes + (8 * matrix + row) * kRowBytes + (row << 4);
    // stmatrix: matrix m holds head-dim columns 2 r + m % 2 (r = row) of the
    // pass's 16, keys 16 (m / 2) .. of its 32. Column 2 r + j is stored as
    // transposed row r + 8 j (the epilogue restores the order), so each 8
    // rows fall in 8 distinct bank groups (rows 2 r would pair up: 2-way
    // conflicts). This lane gives the address of its row, swizzled for the
    // pass's first key at 0.
    const int out_row = row + 8 * (matrix & 1);
    const u32 st_lane = sVt + stage * L.vt_bytes + out_row * kRowBytes + (((matrix >> 1) ^ row) << 4);
    for (int unit = warp; unit < kUnits; unit += Traits::kTransposerWarps) {
      const int key_pass = unit / kColumnUnits;  // keys 32 key_pass ..
      const int column_unit = unit % kColumnUnits;  // head-dim columns kUnitBytes * column_unit ..
      // A unit's columns are a part of a 128-byte chunk row: XOR its offset in.
      const u32 ld = (ld_lane + key_pass * 32 * kRowBytes + (column_unit / kUnitsPerChunk) * BN * kRowBytes) ^
                     ((column_unit % kUnitsPerChunk) * kUnitBytes);
      // 32 keys are a quarter of a 128-key chunk row.
      const u32 st = ((st_lane + (key_pass / 4) * D * kRowBytes) ^ ((key_pass % 4) << 5)) +
                     column_unit * kPassesPerUnit * 16 * kRowBytes;
      u32 w[kPassesPerUnit][4];
#pragma unroll
      for (int i = 0; i < kLoadsAhead; ++i) ldmatrix_x4_trans(w[i], ld ^ (i << 4));
#pragma unroll
      for (int i = 0; i < kPassesPerUnit; ++i) {
        // Keys {2q, 2q+1, 8+2q, 9+2q} (and 16 on) of column 2g, then of 2g+1.
        const u32 out[4] = {byte_perm<0x6420>(w[i][0], w[i][1]), byte_perm<0x7531>(w[i][0], w[i][1]),
                            byte_perm<0x6420>(w[i][2], w[i][3]), byte_perm<0x7531>(w[i][2], w[i][3])};
        stmatrix_x4(st + i * 16 * kRowBytes, out);
        if (i + kLoadsAhead < kPassesPerUnit) ldmatrix_x4_trans(w[i + kLoadsAhead], ld ^ ((i + kLoadsAhead) << 4));
      }
    }
  }
};

}  // namespace cujit::sm90
