// Tests for autotune/tuning_record: a record of every timed candidate and
// the winner, and reading one back (a malformed one is a miss).
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
  const std::vector<TimedCandidate> back = jit::autotune::record_candidates(json::parse(record.dump())).value();
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

// A record from disk with a field of the wrong type threw a JSON type error in
// the tuner, whose caller catches only cache errors: now the record is a miss.
TEST(TuningRecord, MalformedRecordsAreMisses) {
  EXPECT_TRUE(jit::autotune::record_candidates(json::object()).value().empty());
  const json good = {{"config", {{"bm", 64}}}, {"variant", "v"}, {"median_us", 12.5}};
  ASSERT_TRUE(jit::autotune::record_candidates(json{{"candidates", json::array({good})}}));
  auto with = [&](const char* field, json value) {
    json entry = good;
    entry[field] = std::move(value);
    return json{{"winner", {{"bm", 64}}}, {"candidates", json::array({entry})}};
  };
  const std::vector<json> bad_records = {
      with("median_us", "fast"), with("median_us", nullptr), with("median_us", json::array()), with("variant", 5),
      with("error", false),      with("config", "bm64"),     json::parse(R"({"candidates": [{"config": {}}, 1]})"),
      json::parse(R"({"candidates": "all"})"), json::parse(R"({"candidates": [{"variant": "x"}]})"), json::array()};
  for (const json& bad : bad_records) {
    std::string why;
    EXPECT_FALSE(jit::autotune::record_candidates(bad, &why)) << bad.dump();
    EXPECT_FALSE(why.empty()) << bad.dump();
  }
  // Absent fields keep their meaning: no timing is an error, not a time of 0.
  const auto loose = jit::autotune::record_candidates(json::parse(R"({"candidates": [{"config": {"bm": 64}}]})"));
  ASSERT_TRUE(loose && loose->size() == 1);
  EXPECT_EQ((*loose)[0].error, "no timing");
}

// What a tuning run re-timed is kept beside the candidates, and does not
// change how they read back.
TEST(TuningRecord, KeepsWhatWasRetimed) {
  const std::vector<TimedCandidate> candidates = {timed(0, 10), timed(1, 12)};
  const jit::autotune::Retimed retimed{json{{"id", 0}}, "v0", "its samples spread 2.50x", {25, 25, 10}, {10, 10, 10}};
  const json record = json::parse(jit::autotune::make_record(candidates, candidates[0].config, {retimed}).dump());
  ASSERT_EQ(record.at("retimed").size(), 1u);
  const json& r = record.at("retimed")[0];
  EXPECT_EQ(r.at("config"), json({{"id", 0}}));
  EXPECT_EQ(r.at("variant"), "v0");
  EXPECT_EQ(r.at("reason"), "its samples spread 2.50x");
  EXPECT_EQ(r.at("discarded_us"), json({25.0, 25.0, 10.0}));
  EXPECT_EQ(r.at("kept_us"), json({10.0, 10.0, 10.0}));
  EXPECT_EQ(jit::autotune::record_candidates(record).value().size(), 2u);
  // None re-timed: no field at all.
  EXPECT_FALSE(jit::autotune::make_record(candidates, candidates[0].config).contains("retimed"));
}
