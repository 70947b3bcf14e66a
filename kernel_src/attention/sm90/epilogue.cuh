// The epilogue of one consumer warpgroup's tile: O normalized by the row
// sums, converted to T, staged in shared memory with the TMA's 128-byte
// swizzle (16-byte unit u of row r lands at u ^ (r % 8), also free of bank
// conflicts) and written by one TMA store; the natural-log LSE per row when
// asked. FP8 inputs: O times v's descale factor, still in 16 bits (its
// chunks are the output's, twice the inputs'), its columns put back in
// order from the transposed V's (v_transposer.cuh). Where the layout has no
// room to stage O (SmemLayout::o_unstaged), each thread stores its own
// columns from registers instead: a quad's four threads write 32 bytes of
// one row, whole sectors.
#pragma once
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace cujit::sm90 {

template <class Traits>
struct TmaEpilogue {
  using T = typename Traits::T;
  static constexpr int kDT = Traits::kDT;
  static constexpr int kUnitBytes = 16;  // the swizzle's unit
  // 8-column accumulator tiles per 128-byte row, and bytes of the two elements a thread holds of one.
  static constexpr int kTilesPerRow = Traits::kOutChunkColumns / 8;
  static constexpr int kPairBytes = 2 * Traits::kOutBytes;
  static_assert(8 * Traits::kOutBytes == kUnitBytes, "one accumulator tile's row is one swizzle unit");

  u32 sO_wg;  // this warpgroup's 64 rows of O's chunk 0
  int wg, thread, warp, lane;

  __device__ __forceinline__ void store(const float (&o)[1][kDT][4], const OnlineSoftmax<1, Traits::kNT, kDT>& softmax,
                                        float out_scale, const Sm90AttnParams& p, const Tile& t, int m_wg) const {
    constexpr SmemLayout L = Traits::layout();
    const AttnParams& a = p.attn;
    if constexpr (L.o_unstaged) {
      store_unstaged(o, softmax, out_scale, a, t, m_wg);
      return;
    }
    if (thread == 0) bulk_wait_group_read_0();  // the last tile's store has read sO
    warpgroup_sync<Traits::kConsumers>(wg);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax.total_sum(0, r);
      const float inv = softmax.normalizer(l) * out_scale;
      const int row = warp * 16 + lane / 4 + 8 * r;
      if constexpr (Traits::kFp8) {
        // O's columns in the transposed V's order: within each 16, the
        // accumulator's column c is head-dim column 2 (c % 8) + c / 8, so
        // this thread's four of tiles 2s and 2s + 1 are columns 16 s + 4 q ..
        // + 3 (q = lane % 4): 8 bytes of one unit.
#pragma unroll
        for (int s = 0; s < kDT / 2; ++s) {
          u32 lo, hi;
          fp8_columns(o, s, r, inv, lo, hi);
          const int logical_unit = 2 * s + (lane % 4) / 2;
          const int chunk = logical_unit / kTilesPerRow;
          const int unit = (logical_unit % kTilesPerRow) ^ (row % 8);
          const int byte = unit * kUnitBytes + (lane % 2) * 2 * kPairBytes;
          st_shared_v2_b32(sO_wg + (chunk * Traits::BM + row) * kRowBytes + byte, lo, hi);
        }
      } else {
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          const u32 packed = to_packed<T>(o[0][dt], r, inv);
          const int chunk = dt / kTilesPerRow;
          const int unit = (dt % kTilesPerRow) ^ (row % 8);
          st_shared_b32(sO_wg + (chunk * Traits::BM + row) * kRowBytes + unit * kUnitBytes + (lane % 4) * kPairBytes,
                        packed);
        }
      }
      if (a.lse != nullptr && lane % 4 == 0 && m_wg + row < t.seq_q) write_lse(a, t, m_wg, row, softmax.lse(0, r, l));
    }
    fence_proxy_async_shared();
    warpgroup_sync<Traits::kConsumers>(wg);
    // A ragged batch's last tile of a sequence: the rows after it are the
    // next sequence's, which the TMA store (clipped only at the tensor's
    // end) would overwrite.
    if constexpr (Traits::VARLEN) {
      if (t.seq_q - m_wg < 64) {
        store_rows(a, t, m_wg, t.seq_q - m_wg);
        return;
      }
    }
    if (thread == 0) {
#pragma unroll
      for (int c = 0; c < L.o_chunks; ++c)
        tma_store_4d(&p.o, sO_wg + c * Traits::BM * kRowBytes, c * Traits::kOutChunkColumns, t.q_row + m_wg, t.head,
                     t.batch);
      bulk_commit_group();
    }
  }

  // FP8: this thread's four columns of O's 16 columns 16 s .. of row half r
  // (the accumulator's columns are in the transposed V's order: within each
  // 16, column c is head-dim column 2 (c % 8) + c / 8), normalized and
  // converted: columns 16 s + 4 (lane % 4) .. + 1 in lo, + 2 .. + 3 in hi.
  __device__ __forceinline__ static void fp8_columns(const float (&o)[1][kDT][4], int s, int r, float inv, u32& lo,
                                                     u32& hi) {
    lo = cvt_rn_x2<T>(o[0][2 * s][2 * r] * inv, o[0][2 * s + 1][2 * r] * inv);
    hi = cvt_rn_x2<T>(o[0][2 * s][2 * r + 1] * inv, o[0][2 * s + 1][2 * r + 1] * inv);
  }

  // The first of the warpgroup's rows of O in global memory.
  __device__ __forceinline__ static char* o_rows(const AttnParams& a, const Tile& t, int m_wg) {
    return static_cast<char*>(a.o) +
           (i64(t.batch) * a.o_stride[0] + i64(t.head) * a.o_stride[1] + i64(t.q_row + m_wg) * a.o_stride[2]) *
               Traits::kOutBytes;
  }

  // The natural-log LSE of the warpgroup's row `row`.
  __device__ __forceinline__ static void write_lse(const AttnParams& a, const Tile& t, int m_wg, int row, float lse) {
    a.lse[(i64(t.batch) * a.heads_q + t.head) * a.seq_q + t.q_row + m_wg + row] = lse;
  }

  // O not staged: each row from the registers that hold it, FP8's column
  // order put back as the staged store does (8 bytes a thread per 16
  // columns), rows past the sequence left out.
  __device__ __forceinline__ void store_unstaged(const float (&o)[1][kDT][4],
                                                 const OnlineSoftmax<1, Traits::kNT, kDT>& softmax, float out_scale,
                                                 const AttnParams& a, const Tile& t, int m_wg) const {
    static_assert(Traits::kFp8, "only O twice Q's size (FP8 inputs) can lack room to stage");
    char* o_wg = o_rows(a, t, m_wg);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax.total_sum(0, r);
      const float inv = softmax.normalizer(l) * out_scale;
      const int row = warp * 16 + lane / 4 + 8 * r;
      if (m_wg + row < t.seq_q) {
        char* o_row = o_wg + i64(row) * a.o_stride[2] * Traits::kOutBytes + (lane % 4) * 4 * Traits::kOutBytes;
#pragma unroll
        for (int s = 0; s < kDT / 2; ++s) {
          u32 lo, hi;
          fp8_columns(o, s, r, inv, lo, hi);
          st_global_v2_b32(o_row + 16 * s * Traits::kOutBytes, lo, hi);
        }
        if (a.lse != nullptr && lane % 4 == 0) write_lse(a, t, m_wg, row, softmax.lse(0, r, l));
      }
    }
  }

  // The first `rows` rows (0 to 63) of the staged O, by the warpgroup's
  // threads, 16 bytes each. The buffer is free for the next tile once the
  // warpgroup has passed its next barrier.
  __device__ __forceinline__ void store_rows(const AttnParams& a, const Tile& t, int m_wg, int rows) const {
    constexpr SmemLayout L = Traits::layout();
    constexpr int kUnitsPerRow = L.o_chunks * kTilesPerRow;
    char* o = o_rows(a, t, m_wg);
#pragma unroll
    for (int i = thread; i < 64 * kUnitsPerRow; i += 128) {
      const int row = i / kUnitsPerRow;
      const int chunk = (i % kUnitsPerRow) / kTilesPerRow;
      const int unit = i % kTilesPerRow;
      if (row < rows) {
        u32 v[4];
        ld_shared_v4_b32(v, sO_wg + (chunk * Traits::BM + row) * kRowBytes + (unit ^ (row % 8)) * kUnitBytes);
        st_global_v4_b32(o + (row * a.o_stride[2] + chunk * Traits::kOutChunkColumns + unit * (kUnitBytes / Traits::kOutBytes)) *
                             Traits::kOutBytes,
                         v);
      }
    }
  }

  // Once the store has read O's buffer (for O staged in Q's space).
  __device__ __forceinline__ void wait_store_read() const {
    if (thread == 0) bulk_wait_group_read_0();
    warpgroup_sync<Traits::kConsumers>(wg);
  }

  // The last store has completed: before the CTA exits.
  __device__ __forceinline__ void finish() const {
    if (thread == 0) bulk_wait_group_0();
  }
};

}  // namespace cujit::sm90
