// Tests for autotune/tuner: the tuning loop with fake compile and time hooks
// (parallel compiles, interleaved rounds, the playoff, failures, reuse).
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

#include "autotune/tuner.h"
#include "tuning_fakes.h"

using namespace cujit_test;

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

TEST(RunTuning, LeavesOutSpillingCandidatesWhileOneDoesNotSpill) {
  // The fastest two spill: the tuner takes the fastest that does not.
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 30}, {1, 10}, {2, 20}, {3, 40}});
  hooks.compile = [](const json& c) {
    const int id = c.at("id").get<int>();
    if (id == 1 || id == 2) throw jit::autotune::SpillingCandidate("spills 8 bytes at 255 registers");
  };
  const auto result = jit::autotune::run_tuning(configs(4), hooks, {}, 2);
  EXPECT_EQ(result.winner, 0u);
  EXPECT_EQ(result.timed, 2);
  EXPECT_EQ(result.candidates[1].error, "left out: spills 8 bytes at 255 registers");
  EXPECT_EQ(result.candidates[2].error, "left out: spills 8 bytes at 255 registers");
  EXPECT_TRUE(result.candidates[0].error.empty());
}

TEST(RunTuning, TimesSpillingCandidatesWhenEveryOneSpills) {
  // Nothing else compiled (one failed outright): the spilling ones are timed
  // as usual, and the fastest wins.
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 30}, {1, 10}, {2, 20}});
  hooks.compile = [](const json& c) {
    if (c.at("id").get<int>() == 1) throw std::runtime_error("nvrtc said no");
    throw jit::autotune::SpillingCandidate("spills");
  };
  const auto result = jit::autotune::run_tuning(configs(3), hooks, {}, 2);
  EXPECT_EQ(result.winner, 2u);
  EXPECT_EQ(result.timed, 2);
  EXPECT_FALSE(result.candidates[1].error.empty());
}

TEST(RunTuning, APreviousTimingCountsAsACandidateThatDoesNotSpill) {
  // A timing reused from an earlier record is a runnable candidate: a fresh
  // config that spills stays out beside it.
  jit::autotune::TuneHooks hooks = fake_hooks({{0, 30}, {1, 10}});
  hooks.compile = [](const json&) { throw jit::autotune::SpillingCandidate("spills"); };
  const auto result = jit::autotune::run_tuning(configs(2), hooks, {timed(0, 30)}, 2);
  EXPECT_EQ(result.winner, 0u);
  EXPECT_EQ(result.candidates[1].error, "left out: spills");
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

// --- re-timing samples not to be believed (autotune/outliers.h) ---------------------

namespace {

// Two tile classes of two configs each: class 0 (ids 0, 1: 100 and 102 us) is
// truly fastest; class 1 (ids 2, 3: 108 and 110 us) is 8% slower.
constexpr double kTrueUs[] = {100, 102, 108, 110};
std::string class_of(const json& c) { return c.at("id").get<int>() < 2 ? "bm128_bn128" : "bm128_bn64"; }

}  // namespace

// The reported failure: every candidate of one tile class took ~2.5x its
// usual time on its first samples. Without re-timing their medians are 2.5x
// and a config of the other class, 8% slower, wins.
TEST(RunTuning, ClassInflatedOnItsFirstSamplesIsRetimedAndWins) {
  std::map<int, int> calls;
  jit::autotune::TuneHooks hooks = counted_hooks(calls, [](int id, int n) {
    const bool inflated = id < 2 && n < 2;  // class 0's first two samples
    return kTrueUs[id] * (inflated ? 2.5 : 1.0);
  });
  hooks.tile_class = class_of;
  const auto result = jit::autotune::run_tuning(configs(4), hooks, {}, 1);
  ASSERT_TRUE(result.winner.has_value());
  EXPECT_EQ(*result.winner, 0u) << "winner " << result.candidates[*result.winner].variant << " at "
                                << result.candidates[*result.winner].median_us << " us";
  // Exactly the inflated class was re-timed, and the record says what was dropped and kept.
  ASSERT_EQ(result.retimed.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    const jit::autotune::Retimed& r = result.retimed[k];
    EXPECT_EQ(r.config, json({{"id", int(k)}}));
    EXPECT_EQ(r.variant, "v" + std::to_string(k));
    EXPECT_NE(r.reason.find("spread 2.50x"), std::string::npos) << r.reason;
    EXPECT_EQ(r.discarded_us, (std::vector<double>{2.5 * kTrueUs[k], 2.5 * kTrueUs[k], kTrueUs[k]}));
    EXPECT_EQ(r.kept_us, std::vector<double>(jit::autotune::kTimingRounds, kTrueUs[k]));
  }
  EXPECT_DOUBLE_EQ(result.candidates[0].median_us, 100);
  EXPECT_DOUBLE_EQ(result.candidates[1].median_us, 102);
}

// One candidate far slower than the rest of its class on all its first
// samples (steady, so its own spread says nothing) is re-timed; without it
// the next config of its class would win.
TEST(RunTuning, CandidateFarFromItsClassIsRetimed) {
  std::map<int, int> calls;
  jit::autotune::TuneHooks hooks = counted_hooks(calls, [](int id, int n) {
    const double truth[] = {100, 101, 103, 108};
    return truth[id] * (id == 0 && n < jit::autotune::kTimingRounds ? 2.5 : 1.0);
  });
  hooks.tile_class = [](const json& c) { return c.at("id").get<int>() < 3 ? "a" : "b"; };
  const auto result = jit::autotune::run_tuning(configs(4), hooks, {}, 1);
  ASSERT_EQ(result.retimed.size(), 1u);
  EXPECT_EQ(result.retimed[0].config, json({{"id", 0}}));
  EXPECT_NE(result.retimed[0].reason.find("tile class"), std::string::npos) << result.retimed[0].reason;
  EXPECT_EQ(result.winner, 0u);
}

// An honestly slow config (3x its class, every time) is re-timed once, keeps
// its time and loses; an honestly slow class (all its configs alike) is not
// re-timed at all. Nothing is timed more than the bound in tuner.h.
TEST(RunTuning, HonestlySlowConfigIsRetimedOnceAndAHonestlySlowClassNever) {
  std::map<int, int> calls;
  jit::autotune::TuneHooks hooks = counted_hooks(calls, [](int id, int) {
    const double truth[] = {100, 102, 300, 250, 255};  // id 2: slow in class a; ids 3, 4: class b, slow
    return truth[id];
  });
  hooks.tile_class = [](const json& c) { return c.at("id").get<int>() < 3 ? "a" : "b"; };
  const auto result = jit::autotune::run_tuning(configs(5), hooks, {}, 1);
  ASSERT_EQ(result.retimed.size(), 1u);
  EXPECT_EQ(result.retimed[0].config, json({{"id", 2}}));
  EXPECT_EQ(result.retimed[0].kept_us, std::vector<double>(jit::autotune::kTimingRounds, 300.0));
  EXPECT_DOUBLE_EQ(result.candidates[2].median_us, 300);
  using jit::autotune::kPlayoffRounds;
  using jit::autotune::kTimingRounds;
  EXPECT_EQ(calls[2], 2 * kTimingRounds);
  EXPECT_EQ(calls[3], kTimingRounds);
  EXPECT_EQ(calls[4], kTimingRounds);
  EXPECT_EQ(calls[0], kTimingRounds + kPlayoffRounds);  // 0 and 1 are the finalists
  EXPECT_EQ(result.winner, 0u);

  // Reused in a later run (a grown space), nothing of it is timed again.
  calls.clear();
  const auto again = jit::autotune::run_tuning(configs(5), hooks, result.candidates, 1);
  EXPECT_TRUE(calls.empty());
  EXPECT_TRUE(again.retimed.empty());
}

// A candidate that stays erratic after its re-timing is not re-timed again:
// every candidate is re-timed at most once, whatever its new samples say.
TEST(RunTuning, RetimingIsBoundedToOncePerCandidate) {
  std::map<int, int> calls;
  const auto hooks = counted_hooks(calls, [](int id, int n) {
    if (id == 1) return n % 2 == 0 ? 100.0 : 400.0;  // always erratic
    return 150.0;
  });
  const auto result = jit::autotune::run_tuning(configs(2), hooks, {}, 1);
  ASSERT_EQ(result.retimed.size(), 1u);
  EXPECT_EQ(calls[1], 2 * jit::autotune::kTimingRounds);
  EXPECT_EQ(calls[0], jit::autotune::kTimingRounds);
  ASSERT_TRUE(result.winner.has_value());
}
