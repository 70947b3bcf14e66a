// kernel_src/attention/common/key_blocks.h: the key blocks a query tile
// visits and the first that needs a mask, as the kernels and the host's
// tile-work estimate all compute them.
#include <gtest/gtest.h>

#include <algorithm>

#include "attention/common/key_blocks.h"

namespace {

using cujit::key_block_range;
using cujit::KeyBlockRange;

// Arguments in the order of key_block_range, named.
struct Tile {
  int m0, bm, bn, seq_q, seq_k;
  bool causal;
  int causal_offset;
  KeyBlockRange range() const { return key_block_range(m0, bm, bn, seq_q, seq_k, causal, causal_offset); }
};

TEST(KeyBlockRange, NonCausalVisitsEveryKeyAndMasksOnlyAPartialLastBlock) {
  KeyBlockRange r = Tile{0, 128, 128, 1024, 1024, false, 0}.range();
  EXPECT_EQ(r.count, 8);
  EXPECT_EQ(r.first_masked, 8);  // Sk a multiple of BN: no mask at all
  r = Tile{512, 128, 128, 1024, 1000, false, 0}.range();
  EXPECT_EQ(r.count, 8);
  EXPECT_EQ(r.first_masked, 7);  // the last block holds keys 896..999 of 1023
  r = Tile{0, 64, 176, 64, 100, false, 0}.range();
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.first_masked, 0);
}

TEST(KeyBlockRange, CausalTopLeftStopsAtTheDiagonal) {
  // Rows 256..383 see keys up to 383: blocks 0..2, the diagonal one (2) masked.
  KeyBlockRange r = Tile{256, 128, 128, 1024, 1024, true, 0}.range();
  EXPECT_EQ(r.count, 3);
  EXPECT_EQ(r.first_masked, 2);
  r = Tile{0, 128, 64, 1024, 1024, true, 0}.range();  // rows 0..127: keys 0..127, both blocks cut by the diagonal
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.first_masked, 0);
}

TEST(KeyBlockRange, CausalBottomRightShiftsTheDiagonalByTheOffset) {
  // Sq 256, Sk 1024: row i sees keys up to i + 768; rows 0..127 up to 895.
  const KeyBlockRange r = Tile{0, 128, 128, 256, 1024, true, 768}.range();
  EXPECT_EQ(r.count, 7);
  EXPECT_EQ(r.first_masked, 6);  // keys 768..895: row 0 sees only the first
}

TEST(KeyBlockRange, RowsThatSeeNoKeyVisitNoBlock) {
  // Sq 1024 > Sk 256, bottom-right: row i sees keys up to i - 768, so rows
  // below 768 see none.
  EXPECT_EQ((Tile{0, 128, 64, 1024, 256, true, -768}.range().count), 0);
  EXPECT_EQ((Tile{640, 128, 64, 1024, 256, true, -768}.range().count), 0);  // rows 640..767
  const KeyBlockRange r = Tile{768, 128, 64, 1024, 256, true, -768}.range();
  EXPECT_EQ(r.count, 2);  // rows 768..895: keys 0..127
  EXPECT_EQ(r.first_masked, 0);
}

TEST(KeyBlockRange, ALastPartialTileCountsOnlyItsRows) {
  // Sq 1000: the tile at 896 holds 104 rows; top-left causal, row 999 sees all 1000 keys.
  KeyBlockRange r = Tile{896, 128, 128, 1000, 1000, true, 0}.range();
  EXPECT_EQ(r.count, 8);
  EXPECT_EQ(r.first_masked, 7);
  // Sk 2000, top-left: row 999 sees keys up to 999, not the 1023 a full tile's last row would.
  r = Tile{896, 128, 64, 1000, 2000, true, 0}.range();
  EXPECT_EQ(r.count, 16);  // keys 0..999: 15 full blocks of 64 and one of 40
  EXPECT_EQ(r.first_masked, 14);
}

// Against the definition, pair by pair, on small shapes: every visible key
// lies in a block below count, the last of them holds one, and a block below
// first_masked is visible to every row of the tile.
TEST(KeyBlockRange, AgreesWithTheMaskPairByPair) {
  for (const bool causal : {false, true})
    for (const int bm : {16, 32})
      for (const int bn : {16, 48})
        for (int seq_q = 1; seq_q <= 70; seq_q += 23)
          for (int seq_k = 1; seq_k <= 90; seq_k += 29)
            for (const int offset : {seq_k - seq_q, 0, -5, 7})
              for (int m0 = 0; m0 < seq_q; m0 += bm) {
                const Tile t{m0, bm, bn, seq_q, seq_k, causal, offset};
                const KeyBlockRange r = t.range();
                auto visible = [&](int row, int key) { return key < seq_k && (!causal || key <= row + offset); };
                int last_visible_block = -1;
                const int row_end = std::min(m0 + bm, seq_q);
                for (int row = m0; row < row_end; ++row)
                  for (int key = 0; key < seq_k + bn; ++key)
                    if (visible(row, key)) last_visible_block = std::max(last_visible_block, key / bn);
                SCOPED_TRACE(testing::Message() << "causal " << causal << " bm " << bm << " bn " << bn << " Sq " << seq_q
                                                << " Sk " << seq_k << " offset " << offset << " m0 " << m0);
                EXPECT_EQ(r.count, last_visible_block + 1);
                for (int block = 0; block < r.first_masked; ++block)
                  for (int row = m0; row < row_end; ++row)
                    for (int key = block * bn; key < (block + 1) * bn; ++key) ASSERT_TRUE(visible(row, key));
              }
}

// Usable in constant expressions, as the host's pruning and the kernels' static_asserts may need.
static_assert(key_block_range(0, 128, 128, 1024, 1024, true, 0).count == 1);
static_assert(key_block_range(0, 128, 128, 1024, 1000, false, 0).first_masked == 7);

}  // namespace
