// Tests for autotune/timing: the timing loop's arithmetic (warm-up runs, the
// probe that sizes the repetition count, the median) over a fake clock.
#include <gtest/gtest.h>

#include <vector>

#include "autotune/timing.h"

namespace {

// Each timed run takes the next of `durations_us` (the last one repeats).
class FakeClock final : public jit::autotune::EventClock {
 public:
  explicit FakeClock(std::vector<double> durations_us) : durations_(std::move(durations_us)) {}
  void reserve(int count) override { reserved = std::max(reserved, count); }
  void record_start(int pair) override {
    ASSERT_LT(pair, reserved);
    ++starts;
  }
  void record_stop(int pair) override {
    ASSERT_LT(pair, reserved);
    const std::size_t i = std::min(next_++, durations_.size() - 1);
    if (int(elapsed_.size()) <= pair) elapsed_.resize(std::size_t(pair) + 1);
    elapsed_[std::size_t(pair)] = durations_[i];
  }
  void wait(int) override { ++waits; }
  double elapsed_us(int pair) override { return elapsed_.at(std::size_t(pair)); }
  void flush_l2() override { ++flushes; }

  int reserved = 0, starts = 0, waits = 0, flushes = 0;

 private:
  std::vector<double> durations_;
  std::vector<double> elapsed_;
  std::size_t next_ = 0;
};

TEST(TimeRuns, ProbeSizesTheRepetitionsAndTheMedianIsOfTheTimedRunsOnly) {
  // Probe 2 ms: target 10 ms gives 5 reps; then 5 samples.
  FakeClock clock({2000, 10, 30, 20, 50, 40});
  jit::TimingOptions options;
  options.warmup = 3;
  options.min_reps = 1;
  options.max_reps = 100;
  options.target_ms = 10;
  int runs = 0;
  const jit::Timing t = jit::autotune::time_runs(clock, [&] { ++runs; }, options);
  EXPECT_EQ(t.reps, 5);
  EXPECT_EQ(runs, 3 + 1 + 5);  // warm-up, probe, timed
  EXPECT_DOUBLE_EQ(t.median_us, 30);
  EXPECT_DOUBLE_EQ(t.min_us, 10);
  EXPECT_EQ(clock.starts, 6);
  EXPECT_EQ(clock.waits, 2);  // after the probe and after the last run, nothing between
  EXPECT_EQ(clock.flushes, 0);
}

TEST(TimeRuns, RepetitionsClampedAndL2FlushedBeforeEveryTimedRun) {
  jit::TimingOptions options;
  options.min_reps = 4;
  options.max_reps = 7;
  options.flush_l2 = true;
  FakeClock fast({1});  // 1 us: target/probe is huge
  EXPECT_EQ(jit::autotune::time_runs(fast, [] {}, options).reps, 7);
  EXPECT_EQ(fast.flushes, 1 + 7);
  FakeClock slow({1e6});  // 1 s: below one rep
  EXPECT_EQ(jit::autotune::time_runs(slow, [] {}, options).reps, 4);
}

}  // namespace
