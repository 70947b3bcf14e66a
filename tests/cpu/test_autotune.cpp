// Tests for autotune/: winner selection, tuning records, the tuning loop with
// fake compile/time hooks, and static pruning of the portable family. No GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autotune/prune.h"
#include "autotune/selection.h"
#include "autotune/tuner.h"
#include "autotune/tuning_record.h"
#include "jit/attention_family.h"
#include "jit/kernel_family.h"

using jit::autotune::TimedCandidate;
using nlohmann::json;

namespace {

TimedCandidate timed(int id, double us) { return TimedCandidate{json{{"id", id}}, "v" + std::to_string(id), us, ""}; }
TimedCandidate failed(int id, std::string why) {
  return TimedCandidate{json{{"id", id}}, "v" + std::to_string(id), 0, std::move(why)};
}

std::vector<json> configs(int n) {
  std::vector<json> out;
  for (int i = 0; i < n; ++i) out.push_back(json{{"id", i}});
  return out;
}

// Fake timings by config id.
jit::autotune::TuneHooks fake_hooks(std::map<int, double> times) {
  jit::autotune::TuneHooks hooks;
  hooks.variant_name = [](const json& c) { return "v" + std::to_string(c.at("id").get<int>()); };
  hooks.compile = [](const json&) {};
  hooks.time_us = [times = std::move(times)](const json& c) { return times.at(c.at("id").get<int>()); };
  return hooks;
}

// Fake timings that depend on how often a config was timed before: time(id,
// n) for its n-th sample; `calls` counts the samples per id.
jit::autotune::TuneHooks counted_hooks(std::map<int, int>& calls, std::function<double(int id, int n)> time) {
  jit::autotune::TuneHooks hooks = fake_hooks({});
  hooks.time_us = [&calls, time = std::move(time)](const json& c) {
    const int id = c.at("id").get<int>();
    return time(id, calls[id]++);
  };
  return hooks;
}

}  // namespace

// --- select_winner / median ---------------------------------------------------

TEST(SelectWinner, PicksTheFastest) {
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 30), timed(1, 10), timed(2, 20)}), 1u);
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 5)}), 0u);
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 30), timed(1, 20), timed(2, 10)}), 2u);
}

TEST(SelectWinner, TiesWithinToleranceGoToTheEarliest) {
  // 10.04 is within 0.5% of 10.0: the earlier candidate wins.
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 10.04), timed(1, 10.0)}), 0u);
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 50), timed(1, 10.049), timed(2, 10.0), timed(3, 10.02)}), 1u);
  // Just past 0.5%: the faster one wins (a 2% rule picked configs that
  // sustained runs measured 4-6% slower, docs/perf-log.md).
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 10.06), timed(1, 10.0)}), 1u);
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 10.2), timed(1, 10.0)}), 1u);
  // Exact ties.
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 7), timed(1, 7), timed(2, 7)}), 0u);
  // The tolerance is a parameter.
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 10.04), timed(1, 10.0)}, 0.0), 1u);
  EXPECT_EQ(jit::autotune::select_winner({timed(0, 14), timed(1, 10.0)}, 0.5), 0u);
}

TEST(SelectWinner, IgnoresErroredCandidates) {
  // The errored candidate carries a tempting time; it must not count.
  TimedCandidate bad = failed(0, "compile failed: boom");
  bad.median_us = 1;
  EXPECT_EQ(jit::autotune::select_winner({bad, timed(1, 20), timed(2, 10)}), 2u);
  EXPECT_EQ(jit::autotune::select_winner({failed(0, "x"), timed(1, 10.03), failed(2, "y"), timed(3, 10)}), 1u);
}

TEST(SelectWinner, NothingWhenAllErroredOrEmpty) {
  EXPECT_EQ(jit::autotune::select_winner({failed(0, "a"), failed(1, "b")}), std::nullopt);
  EXPECT_EQ(jit::autotune::select_winner({}), std::nullopt);
}

TEST(Median, OddAndEvenLists) {
  EXPECT_DOUBLE_EQ(jit::autotune::median({3.0}), 3.0);
  EXPECT_DOUBLE_EQ(jit::autotune::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_DOUBLE_EQ(jit::autotune::median({9.0, 1.0, 7.0, 3.0, 5.0}), 5.0);
  EXPECT_DOUBLE_EQ(jit::autotune::median({4.0, 1.0}), 2.5);
  EXPECT_DOUBLE_EQ(jit::autotune::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(jit::autotune::median({10.0, 1.0, 100.0, 2.0, 3.0, 50.0}), 6.5);
  EXPECT_DOUBLE_EQ(jit::autotune::median({2.0, 2.0, 2.0, 2.0}), 2.0);
}

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

// --- run_tuning with fake hooks ----------------------------------------------------

TEST(RunTuning, CompilesEachFreshCandidateOnceInParallelAndTimesOnTheCallingThread) {
  constexpr int kConfigs = 8;
  const std::vector<json> space = configs(kConfigs);
  std::map<int, double> times;
  for (int i = 0; i < kConfigs; ++i) times[i] = 100.0 - 5 * i;  // the last is fastest

  std::mutex mutex;
  std::condition_variable cv;
  std::map<int, int> compile_calls;
  int in_flight = 0, peak = 0;
  std::atomic<int> compiles{0};
  // Each compile waits (bounded, a shared deadline) until two compiles have
  // overlapped, so a parallel loop shows concurrency > 1 and a serial one
  // costs at most the deadline, not a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);

  jit::autotune::TuneHooks hooks = fake_hooks(times);
  hooks.compile = [&](const json& c) {
    ++compiles;
    std::unique_lock lock(mutex);
    ++compile_calls[c.at("id").get<int>()];
    peak = std::max(peak, ++in_flight);
    cv.notify_all();
    cv.wait_until(lock, deadline, [&] { return peak >= 2; });
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    lock.lock();
    --in_flight;
  };
  const std::thread::id caller = std::this_thread::get_id();
  std::set<std::thread::id> timing_threads;
  int time_calls = 0;
  auto base_time = hooks.time_us;
  hooks.time_us = [&](const json& c) {
    timing_threads.insert(std::this_thread::get_id());
    ++time_calls;
    return base_time(c);
  };

  const jit::autotune::TuneResult result = jit::autotune::run_tuning(space, hooks, {}, 4);

  EXPECT_EQ(compiles.load(), kConfigs);
  ASSERT_EQ(compile_calls.size(), std::size_t(kConfigs));
  for (const auto& [id, calls] : compile_calls) EXPECT_EQ(calls, 1) << "config " << id;
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GE(peak, 2) << "compiles never overlapped with threads=4";
  }
  EXPECT_EQ(time_calls, kConfigs * jit::autotune::kTimingRounds);
  EXPECT_EQ(timing_threads, std::set<std::thread::id>{caller});

  EXPECT_EQ(result.compiled, kConfigs);
  EXPECT_EQ(result.timed, kConfigs);
  ASSERT_EQ(result.candidates.size(), std::size_t(kConfigs));
  for (int i = 0; i < kConfigs; ++i) {
    EXPECT_EQ(result.candidates[i].config, space[i]);  // in config order
    EXPECT_EQ(result.candidates[i].variant, "v" + std::to_string(i));
    EXPECT_TRUE(result.candidates[i].error.empty());
    EXPECT_DOUBLE_EQ(result.candidates[i].median_us, times[i]);
  }
  EXPECT_EQ(result.winner, std::size_t(kConfigs - 1));
}

// A clock that drifts while tuning runs (each timing is 5 us slower than the
// last) must not decide the winner: candidate 1 is truly 3% faster, but timed
// once each in order it would look slower.
TEST(RunTuning, InterleavedRoundsCancelClockDrift) {
  const double truth[] = {100, 97};
  int calls = 0;
  jit::autotune::TuneHooks hooks = fake_hooks({});
  hooks.compile = [](const json&) {};
  hooks.time_us = [&](const json& c) { return truth[c.at("id").get<int>()] + 5.0 * calls++; };
  const auto result = jit::autotune::run_tuning(configs(2), hooks, {}, 1);
  EXPECT_GE(calls, 2 * jit::autotune::kTimingRounds);
  ASSERT_TRUE(result.winner.has_value());
  EXPECT_EQ(*result.winner, 1u) << "times: " << result.candidates[0].median_us << " vs "
                                << result.candidates[1].median_us;
}

// One lucky sample among three must not decide a close call: candidate 1
// looks 5% faster after the first rounds (95, 95, 120) but is 4% slower
// after that; candidate 0 is 100 every time. Candidate 2, 30% slower, is
// not a finalist and is timed only in the first rounds.
TEST(RunTuning, PlayoffOverturnsALuckyStart) {
  std::map<int, int> calls;
  const auto hooks = counted_hooks(calls, [](int id, int n) {
    if (id == 0) return 100.0;
    if (id == 2) return 130.0;
    return n < 2 ? 95.0 : n == 2 ? 120.0 : 104.0;
  });
  const auto result = jit::autotune::run_tuning(configs(3), hooks, {}, 1);
  using jit::autotune::kPlayoffRounds;
  using jit::autotune::kTimingRounds;
  EXPECT_EQ(calls[0], kTimingRounds + kPlayoffRounds);
  EXPECT_EQ(calls[1], kTimingRounds + kPlayoffRounds);
  EXPECT_EQ(calls[2], kTimingRounds);
  EXPECT_DOUBLE_EQ(result.candidates[1].median_us, 104.0);  // median of all seven samples
  EXPECT_DOUBLE_EQ(result.candidates[2].median_us, 130.0);
  EXPECT_EQ(result.timed, 3);
  EXPECT_EQ(result.winner, 0u);
}

// At most kMaxFinalists, the fastest: ten configs within the window, only the
// six fastest get the extra rounds.
TEST(RunTuning, PlayoffTakesTheFastestFinalistsOnly) {
  std::map<int, int> calls;
  const auto hooks = counted_hooks(calls, [](int id, int) { return 100.0 - 0.5 * id; });  // 9 fastest, all within 5%
  const auto result = jit::autotune::run_tuning(configs(10), hooks, {}, 1);
  for (int id = 0; id < 10; ++id) {
    const bool finalist = id >= 10 - int(jit::autotune::kMaxFinalists);
    EXPECT_EQ(calls[id], jit::autotune::kTimingRounds + (finalist ? jit::autotune::kPlayoffRounds : 0)) << id;
  }
  EXPECT_EQ(result.winner, 9u);  // 96.0 is not within 0.5% of 95.5
}

TEST(RunTuning, FailedCompileMarksThatCandidateOnly) {
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 30}, {1, 5}, {2, 20}, {3, 10}});
  std::mutex mutex;
  std::set<int> timed_ids;
  hooks.compile = [](const json& c) {
    if (c.at("id") == 1) throw std::runtime_error("ptxas: too much shared memory");
  };
  auto base_time = hooks.time_us;
  hooks.time_us = [&](const json& c) {
    std::lock_guard lock(mutex);
    timed_ids.insert(c.at("id").get<int>());
    return base_time(c);
  };
  const auto result = jit::autotune::run_tuning(configs(4), hooks, {}, 4);
  ASSERT_EQ(result.candidates.size(), 4u);
  EXPECT_NE(result.candidates[1].error.find("ptxas: too much shared memory"), std::string::npos)
      << result.candidates[1].error;
  for (int i : {0, 2, 3}) EXPECT_TRUE(result.candidates[i].error.empty()) << i;
  EXPECT_EQ(timed_ids, (std::set<int>{0, 2, 3}));  // the broken one is never timed
  EXPECT_EQ(result.compiled, 4);
  EXPECT_EQ(result.timed, 3);
  EXPECT_EQ(result.winner, 3u);  // 10 us; the 5 us candidate did not compile
}

TEST(RunTuning, FailedTimingMarksThatCandidateOnly) {
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 30}, {1, 5}, {2, 20}});
  auto base_time = hooks.time_us;
  hooks.time_us = [&](const json& c) {
    if (c.at("id") == 1) throw std::runtime_error("launch failed");
    return base_time(c);
  };
  const auto result = jit::autotune::run_tuning(configs(3), hooks, {}, 2);
  EXPECT_FALSE(result.candidates[1].error.empty());
  EXPECT_EQ(result.timed, 2);
  EXPECT_EQ(result.winner, 2u);
}

TEST(RunTuning, AllFailingGivesNoWinner) {
  jit::autotune::TuneHooks hooks = fake_hooks({});
  hooks.compile = [](const json&) { throw std::runtime_error("nope"); };
  const auto result = jit::autotune::run_tuning(configs(3), hooks, {}, 4);
  EXPECT_EQ(result.winner, std::nullopt);
  for (const auto& c : result.candidates) EXPECT_FALSE(c.error.empty());
  EXPECT_EQ(result.timed, 0);
}

TEST(RunTuning, ReusesPreviousTimingsAndOnlyTunesNewConfigs) {
  // A record from an older, smaller config space: ids 0..3 (id 2 had failed).
  const std::vector<TimedCandidate> previous = {timed(0, 40), timed(1, 12), failed(2, "compile failed: old bug"),
                                                timed(3, 25)};
  // The space grew by ids 4 and 5; the hooks know every id.
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 999}, {1, 999}, {2, 30}, {3, 999}, {4, 11}, {5, 50}});
  std::mutex mutex;
  std::multiset<int> compiled_ids;
  std::multiset<int> timed_ids;
  hooks.compile = [&](const json& c) {
    std::lock_guard lock(mutex);
    compiled_ids.insert(c.at("id").get<int>());
  };
  auto base_time = hooks.time_us;
  hooks.time_us = [&](const json& c) {
    timed_ids.insert(c.at("id").get<int>());
    return base_time(c);
  };
  const auto result = jit::autotune::run_tuning(configs(6), hooks, previous, 4);
  // The previously failed candidate is retried; timed ones are reused.
  EXPECT_EQ(compiled_ids, (std::multiset<int>{2, 4, 5}));
  EXPECT_EQ(timed_ids, (std::multiset<int>{2, 2, 2, 4, 4, 4, 5, 5, 5}));  // kTimingRounds each
  EXPECT_EQ(result.compiled, 3);
  EXPECT_EQ(result.timed, 3);
  ASSERT_EQ(result.candidates.size(), 6u);
  EXPECT_DOUBLE_EQ(result.candidates[0].median_us, 40);
  EXPECT_DOUBLE_EQ(result.candidates[1].median_us, 12);
  EXPECT_DOUBLE_EQ(result.candidates[2].median_us, 30);
  EXPECT_TRUE(result.candidates[2].error.empty());
  EXPECT_DOUBLE_EQ(result.candidates[3].median_us, 25);
  EXPECT_DOUBLE_EQ(result.candidates[4].median_us, 11);
  // 11 vs 12: 12 is not within the tie tolerance of 11, so the new config wins.
  EXPECT_EQ(result.winner, 4u);

  // Nothing new: nothing compiled or timed, the old winner stands.
  std::vector<TimedCandidate> full = result.candidates;
  compiled_ids.clear();
  timed_ids.clear();
  const auto again = jit::autotune::run_tuning(configs(6), hooks, full, 4);
  EXPECT_TRUE(compiled_ids.empty());
  EXPECT_TRUE(timed_ids.empty());
  EXPECT_EQ(again.compiled, 0);
  EXPECT_EQ(again.timed, 0);
  EXPECT_EQ(again.winner, 4u);
}

TEST(RunTuning, DeterministicWinner) {
  // Several near-ties around the fastest: the earliest within the tolerance must win every time.
  const std::map<int, double> times = {{0, 20.0}, {1, 10.3}, {2, 10.04}, {3, 10.0}, {4, 10.1},
                                       {5, 15.0}, {6, 10.0}, {7, 30.0},  {8, 10.02}};
  std::optional<std::size_t> first;
  for (int run = 0; run < 20; ++run) {
    const auto result = jit::autotune::run_tuning(configs(9), fake_hooks(times), {}, 4);
    ASSERT_TRUE(result.winner.has_value());
    if (!first) first = result.winner;
    EXPECT_EQ(result.winner, first) << "run " << run;
  }
  EXPECT_EQ(first, 2u);
}

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (unsigned threads : {0u, 1u, 3u, 16u}) {
    std::vector<std::atomic<int>> visits(37);
    jit::autotune::parallel_for(visits.size(), threads, [&](std::size_t i) { ++visits[i]; });
    for (std::size_t i = 0; i < visits.size(); ++i) EXPECT_EQ(visits[i].load(), 1) << i << " threads " << threads;
  }
  jit::autotune::parallel_for(0, 4, [](std::size_t) { ADD_FAILURE() << "called for n = 0"; });
}

// --- prune_space on the portable family -------------------------------------------

namespace {
// The portable kernel's shared memory: a Q tile plus a K and V ring of `stages` BN tiles.
int portable_smem(const json& spec, const json& config) {
  return (config["bm"].get<int>() + 2 * config["stages"].get<int>() * config["bn"].get<int>()) *
         spec["d"].get<int>() * 2;
}
}  // namespace

TEST(PruneSpace, PortableFamilyOnSm89) {
  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  const jit::Target target = jit::offline_target("sm_89");
  ASSERT_EQ(target.max_smem_per_block, 101376);
  for (int d : {64, 128}) {
    for (const char* dtype : {"f16", "bf16"}) {
      const json spec = {{"dtype", dtype}, {"d", d}, {"causal", d == 128}};
      SCOPED_TRACE(spec.dump());
      const std::vector<json> space = family.config_space(spec);
      const jit::autotune::PrunedSpace pruned = jit::autotune::prune_space(family, spec, target);
      EXPECT_EQ(pruned.kept.size() + pruned.pruned.size(), space.size());
      EXPECT_FALSE(pruned.kept.empty());

      // Kept configs keep config-space order.
      std::size_t cursor = 0;
      for (const json& k : pruned.kept) {
        while (cursor < space.size() && space[cursor] != k) ++cursor;
        EXPECT_LT(cursor, space.size()) << "kept config out of order or unknown: " << k.dump();
      }

      // Nothing kept needs more shared memory than sm_89 allows.
      for (const json& k : pruned.kept) EXPECT_LE(portable_smem(spec, k), target.max_smem_per_block) << k.dump();

      int smem_pruned = 0;
      for (const auto& [config, reason] : pruned.pruned) {
        EXPECT_FALSE(reason.empty()) << config.dump();
        if (reason.find("shared memory") != std::string::npos) {
          ++smem_pruned;
          EXPECT_GT(portable_smem(spec, config), target.max_smem_per_block) << config.dump() << ": " << reason;
          EXPECT_NE(reason.find("sm_89"), std::string::npos) << reason;
        }
      }
      EXPECT_GT(smem_pruned, 0) << "some config should exceed sm_89's shared memory";

      // A structurally fine config that only exceeds the limit is pruned for shared memory:
      // BM 128, 8 warps, BN 128, 3 stages needs (128 + 768) * D * 2 bytes.
      const json big = {{"bm", 128}, {"bn", 128}, {"stages", 3}, {"warps", 8}};
      ASSERT_GT(portable_smem(spec, big), target.max_smem_per_block);
      const auto reason = family.why_pruned(spec, big, target);
      ASSERT_TRUE(reason.has_value());
      EXPECT_NE(reason->find("shared memory"), std::string::npos) << *reason;

      // The default config survives pruning.
      const json def = family.default_config(spec, target);
      EXPECT_EQ(family.why_pruned(spec, def, target), std::nullopt) << def.dump();
      EXPECT_NE(std::find(pruned.kept.begin(), pruned.kept.end(), def), pruned.kept.end()) << def.dump();
    }
  }
}

TEST(PruneSpace, DefaultConfigKeptOnEveryKnownArch) {
  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_120"}) {
    const jit::Target target = jit::offline_target(arch);
    for (int d : {64, 128}) {
      const json spec = {{"dtype", "f16"}, {"d", d}, {"causal", false}};
      const auto pruned = jit::autotune::prune_space(family, spec, target);
      const json def = family.default_config(spec, target);
      EXPECT_NE(std::find(pruned.kept.begin(), pruned.kept.end(), def), pruned.kept.end())
          << arch << " d" << d << " " << def.dump();
    }
  }
}

namespace {

TEST(Shortlist, DefaultFirstThenSpaceOrderWithoutRepeats) {
  const std::vector<nlohmann::json> kept = {{{"c", 1}}, {{"c", 2}}, {{"c", 3}}, {{"c", 4}}, {{"c", 5}}};
  const auto list = jit::autotune::shortlist({{"c", 3}}, kept, 4);
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0], (nlohmann::json{{"c", 3}}));
  EXPECT_EQ(list[1], (nlohmann::json{{"c", 1}}));
  EXPECT_EQ(list[2], (nlohmann::json{{"c", 2}}));
  EXPECT_EQ(list[3], (nlohmann::json{{"c", 4}}));
  EXPECT_EQ(jit::autotune::shortlist({{"c", 9}}, kept, 1).size(), 1u);
  EXPECT_EQ(jit::autotune::shortlist({{"c", 1}}, {{{"c", 1}}}, 4).size(), 1u);
}

}  // namespace
