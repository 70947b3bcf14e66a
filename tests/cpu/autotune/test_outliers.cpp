// Tests for autotune/outliers: tile classes and which samples are not to be
// believed.
#include <gtest/gtest.h>

#include <vector>

#include "autotune/outliers.h"

namespace {

using jit::autotune::SampledCandidate;
using jit::autotune::why_retime;
using nlohmann::json;

TEST(TileClass, ConfigsThatDifferOnlyInStagesOrWarpsShareOne) {
  using jit::autotune::tile_class;
  EXPECT_EQ(tile_class({{"bm", 128}, {"bn", 64}, {"stages", 2}}), tile_class({{"bm", 128}, {"bn", 64}, {"stages", 4}}));
  EXPECT_EQ(tile_class({{"bm", 128}, {"bn", 64}, {"stages", 2}, {"warps", 4}}),
            tile_class({{"bm", 128}, {"bn", 64}, {"stages", 3}, {"warps", 8}}));
  EXPECT_NE(tile_class({{"bm", 128}, {"bn", 64}, {"stages", 2}}), tile_class({{"bm", 128}, {"bn", 128}, {"stages", 2}}));
  EXPECT_NE(tile_class({{"bm", 64}, {"bn", 64}}), tile_class({{"bm", 128}, {"bn", 64}}));
  EXPECT_EQ(tile_class(json::object()), "{}");
}

TEST(WhyRetime, SpreadOfItsOwnSamples) {
  const std::vector<SampledCandidate> c = {{"a", {100, 149, 101}, 101}, {"a", {100, 151, 101}, 101}};
  EXPECT_FALSE(why_retime(c, 0));  // 1.49x: within kSpreadLimit
  const auto why = why_retime(c, 1);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("spread 1.51x"), std::string::npos) << *why;
}

TEST(WhyRetime, FarSlowerThanItsClassOnly) {
  // Class a: 100, 104 and 250 (steady samples); class b alone at 400.
  const std::vector<SampledCandidate> c = {{"a", {100, 100, 100}, 100},
                                           {"a", {104, 104, 104}, 104},
                                           {"a", {250, 250, 250}, 250},
                                           {"b", {400, 400, 400}, 400}};
  EXPECT_FALSE(why_retime(c, 0));  // far faster than one mate is not suspicious
  EXPECT_FALSE(why_retime(c, 1));
  const auto why = why_retime(c, 2);  // 250 against the mates' median 102
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("2.45x its tile class's 102.0 us"), std::string::npos) << *why;
  EXPECT_FALSE(why_retime(c, 3));  // an honestly slow class of one
}

TEST(WhyRetime, ReusedCandidatesAreReferencesNeverSuspects) {
  // The reused candidate (no samples now) at 300 is far slower than its mate,
  // but nothing was measured now to doubt; as a reference it flags the fresh one.
  const std::vector<SampledCandidate> c = {{"a", {}, 300}, {"a", {100, 100, 100}, 100}, {"a", {}, 40}};
  EXPECT_FALSE(why_retime(c, 0));
  EXPECT_FALSE(why_retime(c, 2));
  const std::vector<SampledCandidate> d = {{"a", {}, 40}, {"a", {100, 100, 100}, 100}};
  EXPECT_TRUE(why_retime(d, 1));
  // A candidate that failed (no time) is neither.
  const std::vector<SampledCandidate> e = {{"a", {}, 0}, {"a", {100, 100, 100}, 100}};
  EXPECT_FALSE(why_retime(e, 1));
}

}  // namespace
