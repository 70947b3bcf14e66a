// Tests for autotune/tuning_record: a record of every timed candidate and
// the winner, and reading one back (malformed ones yield nothing).
#include <gtest/gtest.h>

#include <vector>

#include "autotune/tuning_record.h"
#include "tuning_fakes.h"

using namespace cujit_test;

// --- tuning records -------------------------------------------------------------

TEST(TuningRecord, RoundTripIncludingAnErroredCandidate) {
  const std::vector<TimedCandidate> candidates = {timed(0, 12.5), failed(1, "compile failed: too many registers"),
                                                  timed(2, 9.75)};
  const json record = jit::autotune::make_record(candidates, candidates[2].config);
  EXPECT_EQ(record["winner"], candidates[2].config);

  // Through text, as the tuning DB stores it.
  const std::vector<TimedCandidate> back = jit::autotune::record_candidates(json::parse(record.dump()));
  ASSERT_EQ(back.size(), candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    EXPECT_EQ(back[i].config, candidates[i].config) << i;
    EXPECT_EQ(back[i].variant, candidates[i].variant) << i;
    EXPECT_EQ(back[i].error, candidates[i].error) << i;
    if (candidates[i].error.empty()) {
      EXPECT_DOUBLE_EQ(back[i].median_us, candidates[i].median_us) << i;
    }
  }
  EXPECT_FALSE(back[1].error.empty());
  EXPECT_EQ(jit::autotune::select_winner(back), 2u);
}

TEST(TuningRecord, MalformedRecordsYieldNoCandidates) {
  EXPECT_TRUE(jit::autotune::record_candidates(json::object()).empty());
  EXPECT_TRUE(jit::autotune::record_candidates(json{{"candidates", 3}}).empty());
  // Entries without a config are skipped; one without a time counts as errored.
  const auto some = jit::autotune::record_candidates(
      json{{"candidates", json::array({json{{"variant", "x"}}, json{{"config", {{"id", 1}}}}})}});
  ASSERT_EQ(some.size(), 1u);
  EXPECT_FALSE(some[0].error.empty());
}
