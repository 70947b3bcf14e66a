// The sm90 kernel's tile orders, as the host models them to choose one.
#include <gtest/gtest.h>

#include <cstdint>

#include "jit/attention/sm90/tile_order.h"

namespace {

using jit::detail::busiest_cta_work;
using jit::detail::choose_tile_order;
using jit::detail::TileGrid;
using jit::detail::TileOrder;

// Work of every tile in K/V blocks plus one, summed over all tiles: what the
// CTAs share, whatever the order.
std::int64_t total_work(const TileGrid& g) {
  const std::int64_t m_blocks = (g.seq_q + g.block_m - 1) / g.block_m;
  std::int64_t total = 0;
  for (std::int64_t m = 0; m < m_blocks; ++m) {
    std::int64_t n_end = g.seq_k;
    if (g.causal) n_end = std::min(n_end, std::min<std::int64_t>(g.block_m, g.seq_q - m * g.block_m) +
                                              m * g.block_m + g.causal_offset);
    total += (n_end > 0 ? (n_end + g.block_n - 1) / g.block_n : 0) + 1;
  }
  return total * g.heads;
}

double imbalance(const TileGrid& g, TileOrder order) {
  return double(busiest_cta_work(g, order)) * g.ctas / double(total_work(g));
}

TileGrid causal_grid(std::int64_t seq, std::int64_t heads, int bm, int bn) {
  return {seq, seq, heads, 0, true, bm, bn, 132};
}

TEST(Sm90TileOrder, DealsRoundsInAlternatingDirections) {
  // 6 tiles of 2 K/V blocks (+1) on 2 CTAs: rounds {0,1}, {3,2}, {4,5}; each CTA gets 3.
  const TileGrid g{256, 128, 3, 0, false, 128, 64, 2};
  EXPECT_EQ(busiest_cta_work(g, TileOrder::heads_first), 9);
  EXPECT_EQ(busiest_cta_work(g, TileOrder::rows_first), 9);
  // Causal, one head of 4 m-blocks of 64 rows, BN 64, 2 CTAs: works 5, 4, 3, 2
  // (longest first). Round 0 gives CTAs 0, 1 the 5 and the 4; round 1, reversed,
  // gives CTA 1 the 3 and CTA 0 the 2: 7 each.
  const TileGrid c{256, 256, 1, 0, true, 64, 64, 2};
  EXPECT_EQ(busiest_cta_work(c, TileOrder::heads_first), 7);
  EXPECT_EQ(total_work(c), 14);
}

TEST(Sm90TileOrder, MoreCtasThanTilesGivesEachTileItsOwnCta) {
  const TileGrid g{1024, 1024, 2, 0, true, 128, 128, 132};
  // The longest tile: 8 key blocks + 1.
  EXPECT_EQ(busiest_cta_work(g, TileOrder::heads_first), 9);
  EXPECT_EQ(busiest_cta_work(g, TileOrder::rows_first), 9);
}

TEST(Sm90TileOrder, TheBusiestCtaHasAtLeastTheMean) {
  for (const TileGrid& g : {causal_grid(16384, 16, 128, 128), causal_grid(4096, 64, 192, 80),
                            causal_grid(1024, 512, 128, 176), TileGrid{3000, 5000, 7, 2000, true, 192, 96, 100}}) {
    for (TileOrder order : {TileOrder::heads_first, TileOrder::rows_first}) {
      EXPECT_GE(busiest_cta_work(g, order) * g.ctas, total_work(g));
    }
  }
}

TEST(Sm90TileOrder, LongCausalHeadsAreDealtByRows) {
  // S = 16k, 16 heads, BM = 128: 128 m-blocks per head against 132 CTAs. By
  // heads the busiest CTA has about 1.5x the mean; by rows about the mean.
  const TileGrid g = causal_grid(16384, 16, 128, 128);
  EXPECT_GT(imbalance(g, TileOrder::heads_first), 1.4);
  EXPECT_LT(imbalance(g, TileOrder::rows_first), 1.05);
  EXPECT_EQ(choose_tile_order(g), TileOrder::rows_first);
  EXPECT_EQ(choose_tile_order(causal_grid(16384, 32, 192, 128)), TileOrder::rows_first);
}

TEST(Sm90TileOrder, ShortCausalHeadsKeepTheirTilesTogether) {
  // Many heads of a few m-blocks: heads_first is already even, and keeps a
  // head's K/V in L2 while its tiles run.
  EXPECT_EQ(choose_tile_order(causal_grid(1024, 512, 128, 128)), TileOrder::heads_first);
  EXPECT_EQ(choose_tile_order(causal_grid(1024, 256, 128, 128)), TileOrder::heads_first);
  EXPECT_EQ(choose_tile_order(causal_grid(4096, 64, 128, 128)), TileOrder::heads_first);
}

TEST(Sm90TileOrder, WithoutAMaskTheOrderIsByHeads) {
  TileGrid g = causal_grid(16384, 16, 128, 128);
  g.causal = false;
  EXPECT_EQ(choose_tile_order(g), TileOrder::heads_first);
  EXPECT_LT(imbalance(g, TileOrder::heads_first), 1.05);
}

}  // namespace
