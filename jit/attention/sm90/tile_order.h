// The order in which the sm90 kernel's persistent CTAs take their tiles, and
// the host's choice of it (or CUJIT_SM90_TILE_ORDER's).
//
// The kernel deals tiles in rounds of `ctas` consecutive indices, alternating
// direction each round (kernel_src/attention/sm90/tile_scheduler.cuh). The
// (batch, head) pairs are taken in groups of `group_heads` consecutive ones;
// within a group the tiles go one m-block of every pair after another,
// longest first. With a causal mask the tiles' lengths differ, so the group
// size decides how evenly the CTAs are loaded and how much K/V they share:
//   - 1 (heads first): the m-blocks of one (batch, head) are consecutive. CTAs
//     working at the same time share that head's K/V in L2. When a head has
//     about as many m-blocks as there are CTAs, the rounds drift against the
//     heads and a few CTAs get the long end of every round (S = 16k, BM =
//     128: the busiest CTA has 1.5x the mean).
//   - every pair (rows first): each round holds tiles of nearly equal
//     length, so the load is even; but a head's tiles are spread over many
//     rounds, and its K/V is read again from memory when the heads do not
//     fit in L2 together (B = 16, S = 1k, 32 heads: 5-11% slower than heads
//     first, docs/perf-log.md).
//   - as many pairs as fit in a share of L2: rounds of nearly equal tiles
//     over K/V that stays in L2.
#pragma once
#include <cstdint>

#include "jit/attention/attention_problem.h"
#include "jit/attention/l2_share.h"

namespace jit::detail {

// What the kernel's scheduler sees of a problem.
struct TileGrid {
  std::int64_t seq_q = 0, seq_k = 0;
  std::int64_t heads = 0;  // batch * heads_q
  int causal_offset = 0;
  bool causal = false;
  int block_m = 0, block_n = 0;
  int ctas = 0;                          // the persistent grid
  std::int64_t kv_bytes_per_head = 0;    // K and V a query head reads, shared among those of its KV head
};

// The busiest CTA's work with groups of group_heads (batch, head) pairs, in
// K/V blocks plus one per tile (the tile's Q load and epilogue).
std::int64_t busiest_cta_work(const TileGrid& grid, std::int64_t group_heads);

// The (batch, head) pairs whose K/V fits kTileGroupL2Bytes, at least 1.
std::int64_t heads_fitting_l2(const TileGrid& grid);

// The group size: without a mask, 1 (every order is even). With one, heads
// first or the groups that fit in L2, whichever loads the busiest CTA less;
// rows first only where it shortens that CTA's work by more than an eighth
// beyond both, as the L2 reuse is worth more below that.
std::int64_t choose_group_heads(const TileGrid& grid);

// The group size for a problem's tiles of block_m rows and block_n keys on
// `ctas` persistent CTAs: CUJIT_SM90_TILE_ORDER's (heads: 1, rows: every
// pair, N: N pairs or every pair if fewer) when it names one, else
// choose_group_heads's.
std::int64_t tile_group_heads(const AttnProblem& problem, int block_m, int block_n, int ctas);

}  // namespace jit::detail
