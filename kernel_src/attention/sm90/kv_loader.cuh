// How the producer brings K/V blocks into the ring: from dense [B, Hkv, Sk, D]
// tensors through TMA, one box of (chunk columns, BN) per chunk. The
// producer owns the protocol (which block, which stage, when); a loader only
// issues the copies that complete on the stage's "full" barrier, so a paged
// loader (block n -> its page) replaces this struct, not the producer.
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
  // The BN keys from row `first_key` of (head_kv, batch) into ring stage `stage`.
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int first_key, Block, int head_kv,
                                         int batch) const {
    load(k, sK, stage, full, first_key, head_kv, batch);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int first_key, Block, int head_kv,
                                         int batch) const {
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
  __device__ __forceinline__ void load_k(int stage, Mbarrier full, int first_key, Block b, int head_kv,
                                         int /*batch*/) const {
    load(k, sK, stage, full, first_key, b, head_kv);
  }
  __device__ __forceinline__ void load_v(int stage, Mbarrier full, int first_key, Block b, int head_kv,
                                         int /*batch*/) const {
    load(v, sV, stage, full, first_key, b, head_kv);
  }

 private:
  // Every lane comes here (the shuffles); lane 0 copies.
  __device__ __forceinline__ void load(const TmaDescriptor* map, u32 ring, int stage, Mbarrier full, int first_key,
                                       Block b, int head_kv) const {
    constexpr SmemLayout L = Traits::layout();
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

}  // namespace cujit::sm90
