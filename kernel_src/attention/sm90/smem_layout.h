// Shared-memory layout of the sm90 attention kernel, used by the kernel and
// by the host (launch size, pruning). Plain constexpr C++.
//
// Every tile is stored as column chunks of [rows][kRowBytes]: one 128-byte
// row per chunk (64 16-bit elements, 128 of e4m3), 128-byte swizzled by TMA,
// so each chunk is a run of 1024-byte swizzle atoms (8 rows) that wgmma
// descriptors address directly. FP8 inputs add a ring of V transposed
// ([D][BN], keys contiguous: 8-bit wgmma takes its B operand K-major only),
// and O, in 16 bits, is twice Q's size. The transposed ring's rows are
// chunks of 128 keys ([BN / 128 chunks][D][128 bytes], the last chunk
// partly used where BN is not a multiple of 128). Where O fits neither
// beside the rest nor in Q's buffer (FP8 at D = 256, BN = 128), it is not
// staged: the epilogue stores it from registers.
#pragma once
#include "common/host_device.h"

namespace cujit::sm90 {

constexpr int kMaxSmemOptIn = 232448;  // sm_90 dynamic shared memory per block
constexpr int kSmemPerSm = 233472;     // sm_90 shared memory per SM
constexpr int kSmemPerCtaReserved = 1024;  // what the system keeps of it per CTA
constexpr int kSmemAlign = 1024;        // 128-byte swizzle atoms must be 1024-aligned
constexpr int kRowBytes = 128;          // one row of a chunk: the 128-byte swizzle's width
constexpr int kBarrierBytes = 8;        // one mbarrier
constexpr int k16BitElementBytes = 2;   // f16, bf16: what the layout assumes unless told

// Elements in one chunk row: 64 of 16 bits.
CUJIT_HOST_DEVICE constexpr int chunk_columns(int element_bytes) { return kRowBytes / element_bytes; }

// Chunks of 128 keys (one 128-byte row of 8-bit V each) that BN keys take,
// the last one partly used; one stage of the transposed V ring is D rows of
// each.
CUJIT_HOST_DEVICE constexpr int transposed_v_chunks(int bn) { return (bn + kRowBytes - 1) / kRowBytes; }
CUJIT_HOST_DEVICE constexpr int transposed_v_bytes(int d, int bn) { return transposed_v_chunks(bn) * d * kRowBytes; }

// CTAs that share one SM: two or three consumer warpgroups (BM = 128, 192)
// hold it alone; one (BM = 64) shares it with a second CTA, so that one
// CTA's tile boundary (first Q K^T, epilogue) overlaps the other's main loop.
CUJIT_HOST_DEVICE constexpr int ctas_per_sm(int bm) { return bm == 64 ? 2 : 1; }

// What each thread holds before setmaxnreg: the register file over the
// CTA's threads (one producer and BM / 64 consumer warpgroups) and its CTAs
// per SM, in the allocation unit of 8. setmaxnreg.inc waits until others'
// .dec have freed what it asks for: the split must fit in this, or the
// consumers wait forever.
CUJIT_HOST_DEVICE constexpr int launch_registers(int bm) {
  return 65536 / ((bm / 64 + 1) * 128 * ctas_per_sm(bm)) / 8 * 8;
}

// Registers per thread after setmaxnreg: the producer warpgroup keeps what
// its role needs and gives the rest of the launch's allocation to the BM / 64
// consumer warpgroups (the host prunes against theirs). The producer needs
// 24, 32 beside three consumer warpgroups or where its four warps gather
// K/V rows from small pages (at 24, 14 of 196 such variants spilled 8-16
// bytes), and 40 where it transposes V (FP8) four passes at a time (D = 128;
// at D = 256 the consumers' O alone is 128 registers, so the transposer
// makes do with 24). The consumers get 240 (BM = 128), 232 (D = 128 FP8,
// gathered rows, or BM = 64 with its CTA sharing the SM; 224 for both), 160
// (BM = 192) or 152 (BM = 192, D = 128 FP8).
CUJIT_HOST_DEVICE constexpr bool transposer_loads_four_ahead(int d) { return d <= 128; }
CUJIT_HOST_DEVICE constexpr int producer_registers(int bm, bool transposes_v = false, int d = 128,
                                                   bool gathers = false) {
  return transposes_v && transposer_loads_four_ahead(d) ? 40 : bm == 192 || gathers ? 32 : 24;
}
CUJIT_HOST_DEVICE constexpr int consumer_registers(int bm, bool transposes_v = false, int d = 128,
                                                   bool gathers = false) {
  const int consumers = bm / 64;
  return (launch_registers(bm) * (consumers + 1) - producer_registers(bm, transposes_v, d, gathers)) / consumers /
         8 * 8;
}
static_assert(consumer_registers(128) == 240 && consumer_registers(128, true, 128) == 232 &&
                  consumer_registers(128, true, 256) == 240 && consumer_registers(64) == 232 &&
                  consumer_registers(192) == 160 && consumer_registers(192, true, 128) == 152,
              "the splits the kernels were tuned with");

// The dynamic shared memory one CTA may take.
CUJIT_HOST_DEVICE constexpr int smem_budget(int bm) {
  return ctas_per_sm(bm) == 1 ? kMaxSmemOptIn : kSmemPerSm / ctas_per_sm(bm) - kSmemPerCtaReserved;
}

struct SmemLayout {
  static constexpr int kMaxQBuffers = 2;
  int chunks;          // D / chunk_columns of the inputs
  int o_chunks;        // D / chunk_columns of the output
  int q_bytes;         // one Q tile
  int o_bytes;         // the O tile (q_bytes for 16-bit inputs)
  int kv_bytes;        // one K or V stage
  int vt_bytes;        // one transposed V stage (8-bit inputs), else 0
  int vt_stages;       // the transposed V ring: STAGES with 8-bit inputs, else none
  // q full/empty per Q buffer, then k full, k empty, v full, v empty (and vt
  // full, vt empty) per stage
  int barrier_bytes;
  // In order of preference, what fits: two Q buffers (the next tile's Q loads
  // while this tile runs) and a separate O buffer (the next Q need not wait
  // for this tile's store); one Q buffer; one Q buffer that also stages O;
  // one Q buffer and O not staged at all.
  int q_buffers;
  bool o_in_q;
  bool o_unstaged;     // O goes from registers to global memory
  int q, k, v, vt, o, barriers;  // offsets from the aligned base
  int bytes;           // dynamic shared memory to request, with slack to align the base

  // element_bytes: q's, k's and v's; out_bytes: o's (16-bit).
  CUJIT_HOST_DEVICE constexpr SmemLayout(int d, int bm, int bn, int stages,
                                         int element_bytes = k16BitElementBytes, int out_bytes = k16BitElementBytes)
      : chunks(d / chunk_columns(element_bytes)),
        o_chunks(d / chunk_columns(out_bytes)),
        q_bytes(bm * d * element_bytes),
        o_bytes(bm * d * out_bytes),
        kv_bytes(bn * d * element_bytes),
        vt_bytes(element_bytes == 1 ? transposed_v_bytes(d, bn) : 0),
        vt_stages(element_bytes == 1 ? stages : 0),
        barrier_bytes(barrier_count(stages, element_bytes == 1) * kBarrierBytes),
        q_buffers(total(2, false, q_bytes, o_bytes, kv_bytes, stages, vt_stages * vt_bytes) <= smem_budget(bm)
                      ? 2
                      : 1),
        o_in_q(o_bytes <= q_bytes &&
               total(1, false, q_bytes, o_bytes, kv_bytes, stages, vt_stages * vt_bytes) > smem_budget(bm)),
        o_unstaged(o_bytes > q_bytes &&
                   total(1, false, q_bytes, o_bytes, kv_bytes, stages, vt_stages * vt_bytes) > smem_budget(bm)),
        q(0),
        k(q_buffers * q_bytes),
        v(q_buffers * q_bytes + stages * kv_bytes),
        vt(q_buffers * q_bytes + 2 * stages * kv_bytes),
        o(o_in_q ? 0 : q_buffers * q_bytes + 2 * stages * kv_bytes + vt_stages * vt_bytes),
        barriers(q_buffers * q_bytes + 2 * stages * kv_bytes + vt_stages * vt_bytes +
                 (o_in_q || o_unstaged ? 0 : o_bytes)),
        bytes(barriers + barrier_bytes + kSmemAlign),
        stages_(stages) {}

  // Barrier slots, byte offsets from `barriers`: q full and q empty of Q
  // buffer b (slots for kMaxQBuffers either way), then k full, k empty,
  // v full and v empty of stage s.
  CUJIT_HOST_DEVICE constexpr int q_full_slot(int b) const { return kBarrierBytes * b; }
  CUJIT_HOST_DEVICE constexpr int q_empty_slot(int b) const { return kBarrierBytes * kMaxQBuffers + kBarrierBytes * b; }
  CUJIT_HOST_DEVICE constexpr int k_full_slot(int s) const { return ring_slot(0, s); }
  CUJIT_HOST_DEVICE constexpr int k_empty_slot(int s) const { return ring_slot(1, s); }
  CUJIT_HOST_DEVICE constexpr int v_full_slot(int s) const { return ring_slot(2, s); }
  CUJIT_HOST_DEVICE constexpr int v_empty_slot(int s) const { return ring_slot(3, s); }
  CUJIT_HOST_DEVICE constexpr int vt_full_slot(int s) const { return ring_slot(4, s); }
  CUJIT_HOST_DEVICE constexpr int vt_empty_slot(int s) const { return ring_slot(5, s); }

  CUJIT_HOST_DEVICE static constexpr int barrier_count(int stages, bool transposed_v) {
    return 2 * kMaxQBuffers + (transposed_v ? 6 : 4) * stages;
  }

  // vt_ring_bytes: the whole transposed V ring (0 without one). no_o: O
  // has no buffer of its own (in Q's, or none).
  CUJIT_HOST_DEVICE static constexpr int total(int q_buffers, bool no_o, int q_bytes, int o_bytes, int kv_bytes,
                                               int stages, int vt_ring_bytes) {
    return q_buffers * q_bytes + (no_o ? 0 : o_bytes) + 2 * stages * kv_bytes + vt_ring_bytes +
           barrier_count(stages, vt_ring_bytes > 0) * kBarrierBytes + kSmemAlign;
  }

 private:
  // The ring barriers start after the Q buffers' four; `kind` counts whole rings.
  CUJIT_HOST_DEVICE constexpr int ring_slot(int kind, int s) const {
    return kBarrierBytes * 2 * kMaxQBuffers + kBarrierBytes * (kind * stages_ + s);
  }
  int stages_;
};

}  // namespace cujit::sm90
