// The order in which the sm90 kernel's persistent CTAs take their tiles, and
// the host's choice between the two orders it knows (or CUJIT_SM90_TILE_ORDER's).
//
// The kernel deals tiles in rounds of `ctas` consecutive indices, alternating
// direction each round (kernel_src/attention/sm90/tile_scheduler.cuh). With a
// causal mask the tiles' lengths differ, so how indices map to tiles decides
// how evenly the CTAs are loaded:
//   - heads_first: the m-blocks of one (batch, head) are consecutive, longest
//     first. CTAs working at the same time share that head's K/V in L2. When
//     a head has about as many m-blocks as there are CTAs, the rounds drift
//     against the heads and a few CTAs get the long end of every round
//     (S = 16k, BM = 128: the busiest CTA has 1.5x the mean).
//   - rows_first: one m-block of every (batch, head) after another, longest
//     first. Each round holds tiles of nearly equal length, so the load is
//     even; but a head's tiles are spread over many rounds, and its K/V is
//     read again from memory when the heads do not fit in L2 together.
#pragma once
#include <cstdint>

#include "jit/attention/attention_problem.h"

namespace jit::detail {

enum class TileOrder : int { heads_first = 0, rows_first = 1 };

// What the kernel's scheduler sees of a problem.
struct TileGrid {
  std::int64_t seq_q = 0, seq_k = 0;
  std::int64_t heads = 0;  // batch * heads_q
  int causal_offset = 0;
  bool causal = false;
  int block_m = 0, block_n = 0;
  int ctas = 0;  // the persistent grid
};

// The busiest CTA's work under an order, in K/V blocks plus one per tile
// (the tile's Q load and epilogue).
std::int64_t busiest_cta_work(const TileGrid& grid, TileOrder order);

// heads_first unless rows_first shortens the busiest CTA's work by more than
// an eighth: below that the L2 reuse of heads_first is worth more.
TileOrder choose_tile_order(const TileGrid& grid);

// The order for a problem's tiles of block_m rows and block_n keys on `ctas`
// persistent CTAs: CUJIT_SM90_TILE_ORDER's when it names one, else
// choose_tile_order's.
TileOrder tile_order(const AttnProblem& problem, int block_m, int block_n, int ctas);

}  // namespace jit::detail
