// The kernel argument of the sm90 family: TMA descriptors for Q, K, V and O
// (encoded on the host with cuTensorMapEncodeTiled, read by the TMA unit from
// kernel parameter space) and the common attention parameters. Plain data,
// no includes beyond the common struct, so NVRTC and the host both accept it.
#pragma once
#include "attention/attn_params.h"
#include "common/fast_divisor.h"

namespace cujit {

// Same size and alignment as the driver's CUtensorMap.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

// The kernel's PAGE argument where it gathers K/V rows from pages of any
// size (kv_loader.cuh, GatheredKvLoader); PAGE > 0 is a page size loaded by
// TMA boxes, 0 a contiguous cache.
constexpr int kGatheredRows = -1;

struct Sm90AttnParams {
  // 4-D maps over (D, S, H, B), innermost first, 128-byte swizzled, with
  // boxes of (64, 64, 1, 1) for Q and O (one warpgroup's rows) and
  // (64, BN, 1, 1) for K and V.
  TmaDescriptor q, k, v, o;
  AttnParams attn;
  int m_blocks;     // ceil(seq_q / BM)
  int total_tiles;  // m_blocks * heads_q * batch
  // The order of the tiles (jit/attention/sm90/tile_order.h): groups of
  // group_heads consecutive (batch, head) pairs, rows first within each. A
  // tile index is divided by a group's tiles (group_heads * m_blocks), its
  // place in the group by the group's pairs (group_heads, or the last
  // group's last_group_heads), and a (batch, head) index by heads_q.
  int group_heads;
  int pairs;  // batch * heads_q
  // Staged FP8 V (v_stage_params.h): key blocks per (batch, KV head); `v`
  // then maps the staging as [rows][128 bytes] (a 4-D map of extent 1 in its
  // two outer dimensions), boxes of (128, D).
  int vt_blocks;
  FastDivisor tile_divisor, group_divisor, last_group_divisor, head_divisor;
  // A chunk of query rows over a KV cache (KV_CACHE): each sequence's key
  // count, at most attn.seq_k (null: every sequence has attn.seq_k keys).
  // Paged (PAGE > 0): `k` and `v` map the page pools as (D, page size, Hkv,
  // pages), and row b of the block table, table_stride entries from the
  // last, lists sequence b's pages of [0, num_pages).
  // Gathered rows (PAGE = kGatheredRows): attn.k and attn.v are the pools
  // as [pages, Hkv, page size, D] through their strides, and page_divisor
  // divides by the page size.
  const int* seq_lens;
  const int* block_table;
  long long table_stride;
  int num_pages;
  FastDivisor page_divisor;
};

}  // namespace cujit
