// How the producer brings K/V blocks into the ring: from dense [B, Hkv, Sk, D]
// tensors through TMA, one box of (chunk columns, BN) per chunk. The
// producer owns the protocol (which block, which stage, when); a loader looks
// up what a block needs before the stage's wait (`block`), says which of the
// producer's threads arrives for it (`leader`), and issues the copies and the
// arrivals that complete the stage's "full" barrier, so a paged loader
// (block n -> its pages) replaces this struct, not the producer.
#pragma once
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/v_stage_params.h"

namespace cujit::sm90 {

template <class Traits>
struct TmaKvLoader {
  const TmaDescriptor* k;
  const TmaDescriptor* v;
  u32 sK, sV;  // stage 0 of the K and V rings
  u32 sVt;     // ... and of the transposed V ring (staged FP8 V)

  __device__ __forceinline__ void prefetch() const {
    prefetch_tensor_map(k);
    prefetch_tensor_map(v);
  }
  // What a paged loader looks up for a block ahead of its stage: nothing.
  struct Block {};
  __device__ __forceinline__ Block block(int /*first_key*/, int /*batch*/, int /*seq_k*/) const { return {}; }
  // One thread produces: it issues every copy.
  __device__ __forceinline__ bool leader() const { return true; }
  __device__ __forceinline__ void drain() const {}  // TMA's copies are the unit's
  // The BN keys from row `first_key` of (head_kv, batch) into ring stage
  // `stage`, announced on its `full` barrier.
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int first_key, Block, int head_kv,
                                         int batch) const {
    full.arrive_expect_tx(Traits::layout().kv_bytes);
    load(k, sK, stage, full, first_key, head_kv, batch);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int first_key, Block, int head_kv,
                                         int batch) const {
    full.arrive_expect_tx(Traits::layout().kv_bytes);
    load(v, sV, stage, full, first_key, head_kv, batch);
  }
  // Staged V (Traits::kVtStaged; `v` maps the staging as [rows][128 bytes]):
  // key block `block` of (head_kv, batch), one (128, D) box per chunk, into
  // stage `stage` of the transposed ring.
  __device__ __forceinline__ void load_vt(int stage, Mbarrier full, int block, int head_kv, int batch, int heads_kv,
                                          int blocks) const {
    constexpr SmemLayout L = Traits::layout();
    constexpr int kChunks = transposed_v_chunks(Traits::BN);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const long long row = v_stage_row(batch, head_kv, block, c, heads_kv, blocks, kChunks, Traits::D);
      tma_load_4d(sVt + stage * L.vt_bytes + c * Traits::D * kRowBytes, v, full.addr, 0, int(row), 0, 0);
    }
  }

 private:
  __device__ __forceinline__ static void load(const TmaDescriptor* map, u32 ring, int stage, Mbarrier full,
                                              int first_key, int head_kv, int batch) {
    constexpr SmemLayout L = Traits::layout();
#pragma unroll
    for (int c = 0; c < L.chunks; ++c)
      tma_load_4d(ring + stage * L.kv_bytes + c * Traits::BN * kRowBytes, map, full.addr, c * Traits::kChunkColumns,
                  first_key, head_kv, batch);
  }
};

// The same from page pools (Traits::PAGE keys a page): `k` and `v` map a pool
// as (D, page size, Hkv, pages), and a block's keys come a page at a time,
// boxes of (chunk columns, PAGE) rows, or from one page where a page holds
// several blocks. Each box starts on a 1,024-byte swizzle atom of the stage
// (PAGE >= 8 rows of 128 bytes), so the boxes lay the block out as one box
// of BN rows would. A page past the sequence's last (a block's keys past its
// length) takes the last one's id, and ids are clamped to the pool, so every
// box reads the pool's memory: those keys are masked, and their V rows
// zeroed before P V (mainloop.cuh).
template <class Traits>
struct PagedTmaKvLoader {
  static constexpr int PAGE = Traits::PAGE, BN = Traits::BN;
  static constexpr int kBoxRows = PAGE < BN ? PAGE : BN;
  static constexpr int kBoxes = BN / kBoxRows;
  static_assert(kBoxes <= 32, "a lane per page of a block");
  const TmaDescriptor* k;
  const TmaDescriptor* v;
  u32 sK, sV;
  const int* block_table;
  long long table_stride;
  int num_pages;
  int lane;  // the producer is a warp: lane i looks up a block's i-th page

  __device__ __forceinline__ void prefetch() const {
    prefetch_tensor_map(k);
    prefetch_tensor_map(v);
  }
  // A block's pages, one table load per lane for the whole block (K and V
  // share them): lane i holds the id of the block's i-th page. Issued before
  // the producer waits for the stage, so the table's latency hides behind
  // the wait instead of stalling each box.
  struct Block {
    int page;
  };
  __device__ __forceinline__ Block block(int first_key, int batch, int seq_k) const {
    const int* row = block_table + batch * table_stride;
    const int last = int(unsigned(seq_k - 1) / unsigned(PAGE));  // a loaded block has a key
    const int first = int(unsigned(first_key) / unsigned(PAGE));
    Block b{0};
    if (lane < kBoxes) b.page = min(max(row[min(first + lane, last)], 0), num_pages - 1);
    return b;
  }
  // Lane 0 issues the copies (and the producer's barrier arrivals).
  __device__ __forceinline__ bool leader() const { return lane == 0; }
  __device__ __forceinline__ void drain() const {}
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int first_key, Block b, int head_kv,
                                         int /*batch*/) const {
    load(k, sK, stage, full, first_key, b, head_kv);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int first_key, Block b, int head_kv,
                                         int /*batch*/) const {
    load(v, sV, stage, full, first_key, b, head_kv);
  }

 private:
  // Every lane comes here (the shuffles); lane 0 announces and copies.
  __device__ __forceinline__ void load(const TmaDescriptor* map, u32 ring, int stage, Mbarrier full, int first_key,
                                       Block b, int head_kv) const {
    constexpr SmemLayout L = Traits::layout();
    if (lane == 0) full.arrive_expect_tx(L.kv_bytes);
    const int row_in_page = PAGE > BN ? int(unsigned(first_key) % unsigned(PAGE)) : 0;  // pages of several blocks
#pragma unroll
    for (int i = 0; i < kBoxes; ++i) {
      const int page = __shfl_sync(0xffffffffu, b.page, i);
      if (lane == 0) {
#pragma unroll
        for (int c = 0; c < L.chunks; ++c)
          tma_load_4d(ring + stage * L.kv_bytes + (c * BN + i * kBoxRows) * kRowBytes, map, full.addr,
                      c * Traits::kChunkColumns, row_in_page, head_kv, page);
      }
    }
  }
};

// The same from page pools of any size (Traits::kGathered), a row at a
// time: a TMA box of a page's few rows costs the TMA unit about what a box
// of a block's rows does, so over small pages the unit, not the consumers,
// set the pace (docs/perf-log.md, "sm90 over a KV cache v2"). The producer
// warpgroup's four warps copy instead, BN / 4 rows each: lane j of warp w
// finds row w * BN / 4 + j's page and row in it before the stage's wait;
// each cp.async then takes 16 bytes of one of four rows (eight lanes a
// 128-byte row of a chunk, the warp's 512 bytes coalesced), its source
// offset shuffled from the row's lane, and writes them where TMA's 128-byte
// swizzle would. A row past the sequence's keys reads its last key: masked
// to a probability of exactly 0, times finite V bytes, so unlike TMA's rows
// past the length it needs no zeroing before P V (mainloop.cuh), and only
// the producer writes a stage (racecheck reported the consumers' zeroing
// stores and these copies as hazards). Each thread's arrival on
// the stage's barrier comes when its copies land (the barrier counts 128);
// the consumers fence the async proxy after their wait, as wgmma reads what
// the generic proxy wrote.
template <class Traits>
struct GatheredKvLoader {
  static constexpr int BN = Traits::BN;
  static constexpr int kRows = BN / 4;  // a warp's
  static_assert(kRows <= 32 && kRows % 4 == 0, "a lane per row of the warp's, four rows a copy");
  const Sm90AttnParams& p;
  u32 sK, sV;
  int warp, lane;

  __device__ __forceinline__ void prefetch() const {}
  // Where this lane's row of a block lies: its page id and row in the page.
  struct Block {
    int page;
    int row;
  };
  __device__ __forceinline__ Block block(int first_key, int batch, int seq_k) const {
    const unsigned key = unsigned(min(first_key + warp * kRows + lane, seq_k - 1));  // a loaded block has a key
    const unsigned index = p.page_divisor.quotient(key);
    const int page = p.block_table[batch * p.table_stride + index];
    return {min(max(page, 0), p.num_pages - 1), int(p.page_divisor.remainder(key, index))};
  }
  __device__ __forceinline__ bool leader() const { return warp == 0 && lane == 0; }
  // Before the producer thread returns: its last copies land while it waits
  // (their barrier arrivals then come from a thread still running). The
  // copies are in no commit group (the barrier tracks them), hence wait_all.
  __device__ __forceinline__ void drain() const { cp_async_wait_all(); }
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int /*first_key*/, Block b, int head_kv,
                                         int /*batch*/) const {
    load(p.attn.k, p.attn.k_stride, sK, stage, full, b, head_kv);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int /*first_key*/, Block b, int head_kv,
                                         int /*batch*/) const {
    load(p.attn.v, p.attn.v_stride, sV, stage, full, b, head_kv);
  }

 private:
  __device__ __forceinline__ void load(const void* pool, const long long (&stride)[3], u32 ring, int stage,
                                       Mbarrier full, Block b, int head_kv) const {
    constexpr SmemLayout L = Traits::layout();
    constexpr int kBytes = Traits::kElementBytes;
    // This lane's row.
    const long long row_src = reinterpret_cast<long long>(pool) +
                              (b.page * stride[0] + head_kv * stride[1] + b.row * stride[2]) * kBytes;
    const int unit = lane % 8;  // 16 bytes of a 128-byte row
#pragma unroll
    for (int i = 0; i < kRows / 4; ++i) {
      const int r = 4 * i + lane / 8;  // of the warp's rows
      const char* src = reinterpret_cast<const char*>(__shfl_sync(0xffffffffu, row_src, r)) + unit * 16;
      const int row = warp * kRows + r;
      const u32 dst = ring + stage * L.kv_bytes + row * kRowBytes + ((unit ^ (row % 8)) << 4);
#pragma unroll
      for (int c = 0; c < L.chunks; ++c) cp_async_cg_16(dst + c * BN * kRowBytes, src + c * kRowBytes, 16);
    }
    cp_async_mbarrier_arrive_noinc(full.addr);
  }
};

}  // namespace cujit::sm90
