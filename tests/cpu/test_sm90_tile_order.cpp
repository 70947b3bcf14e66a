// The sm90 kernel's tile orders, as the host models them to choose one.
#include <gtest/gtest.h>

#include <cstdint>

#include "jit/attention/sm90/tile_order.h"

namespace {

using jit::detail::busiest_cta_work;
using jit::detail::choose_group_heads;
using jit::detail::heads_fitting_l2;
using jit::detail::TileGrid;

// Group sizes: heads first and rows first are the two ends.
constexpr std::int64_t kHeadsFirst = 1;
std::int64_t rows_first(const TileGrid& g) { return g.heads; }

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

double imbalance(const TileGrid& g, std::int64_t group_heads) {
  return double(busiest_cta_work(g, group_heads)) * g.ctas / double(total_work(g));
}

TileGrid causal_grid(std::int64_t seq, std::int64_t heads, int bm, int bn) {
  return {seq, seq, heads, 0, true, bm, bn, 132};
}

TEST(Sm90TileOrder, DealsRoundsInAlternatingDirections) {
  // 6 tiles of 2 K/V blocks (+1) on 2 CTAs: rounds {0,1}, {3,2}, {4,5}; each CTA gets 3.
  const TileGrid g{256, 128, 3, 0, false, 128, 64, 2};
  EXPECT_EQ(busiest_cta_work(g, kHeadsFirst), 9);
  EXPECT_EQ(busiest_cta_work(g, rows_first(g)), 9);
  // Causal, one head of 4 m-blocks of 64 rows, BN 64, 2 CTAs: works 5, 4, 3, 2
  // (longest first). Round 0 gives CTAs 0, 1 the 5 and the 4; round 1, reversed,
  // gives CTA 1 the 3 and CTA 0 the 2: 7 each.
  const TileGrid c{256, 256, 1, 0, true, 64, 64, 2};
  EXPECT_EQ(busiest_cta_work(c, kHeadsFirst), 7);
  EXPECT_EQ(total_work(c), 14);
}

TEST(Sm90TileOrder, MoreCtasThanTilesGivesEachTileItsOwnCta) {
  const TileGrid g{1024, 1024, 2, 0, true, 128, 128, 132};
  // The longest tile: 8 key blocks + 1.
  EXPECT_EQ(busiest_cta_work(g, kHeadsFirst), 9);
  EXPECT_EQ(busiest_cta_work(g, rows_first(g)), 9);
}

TEST(Sm90TileOrder, TheBusiestCtaHasAtLeastTheMean) {
  for (const TileGrid& g : {causal_grid(16384, 16, 128, 128), causal_grid(4096, 64, 192, 80),
                            causal_grid(1024, 512, 128, 176), TileGrid{3000, 5000, 7, 2000, true, 192, 96, 100}}) {
    for (std::int64_t group : {kHeadsFirst, std::int64_t{2}, std::int64_t{5}, rows_first(g)}) {
      EXPECT_GE(busiest_cta_work(g, group) * g.ctas, total_work(g));
    }
  }
}

TEST(Sm90TileOrder, LongCausalHeadsAreDealtByRows) {
  // S = 16k, 16 heads, BM = 128: 128 m-blocks per head against 132 CTAs. By
  // heads the busiest CTA has about 1.5x the mean; by rows about the mean.
  const TileGrid g = causal_grid(16384, 16, 128, 128);
  EXPECT_GT(imbalance(g, kHeadsFirst), 1.4);
  EXPECT_LT(imbalance(g, rows_first(g)), 1.05);
  EXPECT_EQ(choose_group_heads(g), rows_first(g));
  EXPECT_EQ(choose_group_heads(causal_grid(16384, 32, 192, 128)), 32);
}

TEST(Sm90TileOrder, GroupsDealRowsWithinEachGroup) {
  // 3 heads of 2 m-blocks (works 3 then 2, longest first) on 2 CTAs, groups
  // of 2: indices give 3, 3, 2, 2 (heads 0 and 1) then 3, 2 (head 2). Rounds
  // {0, 1}, {3, 2}, {4, 5}: CTA 0 gets 3 + 2 + 3, CTA 1 3 + 2 + 2.
  const TileGrid g{256, 256, 3, 0, true, 128, 128, 2};
  EXPECT_EQ(busiest_cta_work(g, 2), 8);
  EXPECT_EQ(total_work(g), 15);
  // A group larger than the heads is every head: rows first.
  EXPECT_EQ(busiest_cta_work(g, 7), busiest_cta_work(g, rows_first(g)));
}

TEST(Sm90TileOrder, ShortCausalHeadsBeyondL2AreDealtByRowsInGroupsThatFit) {
  // B = 16, S = 1k, 32 query heads on 8 KV heads, D = 128 in 16 bits: a query
  // head reads 128 KiB of K/V (its KV head's 512 KiB over 4), 64 MiB for all
  // 512: rows first reads every head's K/V again for each m-block (measured
  // 5-11% slower than heads first, docs/perf-log.md); 192 heads fit.
  TileGrid g = causal_grid(1024, 512, 128, 128);
  g.kv_bytes_per_head = 128 << 10;
  EXPECT_EQ(heads_fitting_l2(g), 192);
  const std::int64_t group = choose_group_heads(g);
  EXPECT_NE(group, rows_first(g));
  EXPECT_LE(busiest_cta_work(g, group), busiest_cta_work(g, kHeadsFirst));
  // With K/V that fits in L2 whole, the groups are every head.
  g.kv_bytes_per_head = 1 << 10;
  EXPECT_EQ(heads_fitting_l2(g), 512);
}

TEST(Sm90TileOrder, ShortCausalHeadsKeepTheirTilesTogether) {
  // Many heads of a few m-blocks: heads_first is already even, and keeps a
  // head's K/V in L2 while its tiles run.
  for (const TileGrid& g :
       {causal_grid(1024, 512, 128, 128), causal_grid(1024, 256, 128, 128), causal_grid(4096, 64, 128, 128)}) {
    TileGrid one_head_fits = g;
    one_head_fits.kv_bytes_per_head = jit::detail::kTileGroupL2Bytes;
    EXPECT_EQ(choose_group_heads(one_head_fits), kHeadsFirst);
  }
}

TEST(Sm90TileOrder, WithoutAMaskTheOrderIsByHeads) {
  TileGrid g = causal_grid(16384, 16, 128, 128);
  g.causal = false;
  EXPECT_EQ(choose_group_heads(g), kHeadsFirst);
  EXPECT_LT(imbalance(g, kHeadsFirst), 1.05);
}

}  // namespace
