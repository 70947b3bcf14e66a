// Tests for autotune/config_choice: the policy (CUJIT_AUTOTUNE's modes as
// data), the tuning DB, the memo and graph capture, with a fake family and
// fake hooks: no GPU, no runtime.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "autotune/config_choice.h"
#include "autotune/prune.h"
#include "cache/tuning_db.h"
#include "tests/support/temp_dir.h"

namespace {

using jit::Json;
using jit::autotune::Mode;

// Configs {"id": 0..5}; id 5 never fits; the default is id 1.
class FakeFamily final : public jit::KernelFamily {
 public:
  explicit FakeFamily(std::string name, bool memory_bound = false)
      : name_(std::move(name)), memory_bound_(memory_bound) {}
  std::string name() const override { return name_; }
  const jit::KernelSources& sources() const override { return sources_; }
  std::vector<Json> config_space(const Json&) const override {
    std::vector<Json> space;
    for (int i = 0; i < 6; ++i) space.push_back({{"id", i}});
    return space;
  }
  std::optional<std::string> why_pruned(const Json&, const Json& config, const jit::Target&) const override {
    if (config.at("id") == 5) return std::string("too big");
    return std::nullopt;
  }
  Json default_config(const Json&, const jit::Target&) const override { return {{"id", 1}}; }
  std::string variant_name(const Json&, const Json& config) const override {
    return name_ + "_" + std::to_string(config.at("id").get<int>());
  }
  std::string name_expression(const Json&, const Json&) const override { return "k"; }
  bool memory_bound() const override { return memory_bound_; }

 private:
  std::string name_;
  bool memory_bound_;
  jit::KernelSources sources_;
};

// Every run takes 1 us (the fastest is config 3's 0.5 us).
class UnitClock final : public jit::autotune::EventClock {
 public:
  double next_us = 1;
  void reserve(int) override {}
  void record_start(int) override {}
  void record_stop(int) override {}
  void wait(int) override {}
  double elapsed_us(int) override { return next_us; }
  void flush_l2() override { ++flushes; }
  int flushes = 0;
};

class ConfigChoice : public cujit_test::TempDirTest {
 protected:
  jit::autotune::ChoiceContext context(Mode mode) {
    jit::autotune::ChoiceContext c;
    c.target.arch = "sm_80";
    c.target.device_name = "Fake GPU";
    c.context = &context_id_;
    c.mode = mode;
    c.cache_root = jit::cache::TrustedDir::open_root(tmp_, /*create=*/true);
    c.cujit_version = "test";
    c.nvrtc_version = "0";
    return c;
  }
  jit::autotune::ChoiceHooks hooks() {
    jit::autotune::ChoiceHooks h;
    h.compile = [this](const Json& config) { compiled.push_back(config.at("id")); };
    h.runner = [this](const Json& config) -> std::function<void()> {
      const int id = config.at("id");
      return [this, id] {
        timed[id]++;
        clock.next_us = id == 3 ? 0.5 : 1.0;
      };
    };
    h.clock = &clock;
    h.log.level = jit::autotune::TuningLog::debug;
    h.log.write = [this](int, const std::string& line) { log.push_back(line); };
    h.count_tuning_run = [this] { ++tuning_runs; };
    h.count_db_hit = [this] { ++db_hits; };
    return h;
  }
  Json choose(const FakeFamily& family, Mode mode, bool capturing = false) {
    jit::autotune::ChoiceContext c = context(mode);
    c.capturing = capturing;
    return jit::autotune::choose_config(family, spec_, bucket_, c, hooks());
  }
  bool logged(const std::string& text) const {
    for (const std::string& line : log) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

  int context_id_ = 0;
  Json spec_ = {{"s", 1}};
  Json bucket_ = {{"b", 1}};
  UnitClock clock;
  std::vector<int> compiled;
  std::map<int, int> timed;
  std::vector<std::string> log;
  int tuning_runs = 0, db_hits = 0;
};

TEST_F(ConfigChoice, OffUsesTheDefaultWithoutCompilingOrTiming) {
  const FakeFamily family("off_family");
  EXPECT_EQ(choose(family, Mode::off), (Json{{"id", 1}}));
  EXPECT_TRUE(compiled.empty());
  EXPECT_TRUE(timed.empty());
  EXPECT_TRUE(logged("CUJIT_AUTOTUNE=off: default config off_family_1"));
}

TEST_F(ConfigChoice, ScrubsL2BeforeEachTimedRunOnlyForMemoryBoundFamilies) {
  const FakeFamily compute("compute_family");
  EXPECT_EQ(choose(compute, Mode::full), (Json{{"id", 3}}));
  EXPECT_EQ(clock.flushes, 0);
  const FakeFamily streaming("streaming_family", /*memory_bound=*/true);
  EXPECT_EQ(choose(streaming, Mode::full), (Json{{"id", 3}}));
  int timed_runs = 0;
  for (const auto& [id, runs] : timed) timed_runs += runs;
  // Warm-up runs are not scrubbed; every timed run (a probe and its
  // repetitions per round) is: at least one per candidate and round.
  EXPECT_GE(clock.flushes, 5 * 3);
  EXPECT_LT(clock.flushes, timed_runs);
}

TEST_F(ConfigChoice, FullTimesEveryKeptConfigStoresTheRecordAndMemoizes) {
  const FakeFamily family("full_family");
  EXPECT_EQ(choose(family, Mode::full), (Json{{"id", 3}}));
  EXPECT_EQ(compiled.size(), 5u);  // id 5 is pruned
  EXPECT_EQ(timed.count(5), 0u);
  EXPECT_EQ(tuning_runs, 1);
  EXPECT_TRUE(logged("pruned full_family_5: too big"));
  EXPECT_TRUE(logged("tuning full_family"));
  const Json key = jit::autotune::tune_key(family, spec_, bucket_, context(Mode::full));
  const std::optional<Json> record = jit::cache::TuningDb(tmp_).load(key);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->at("winner"), (Json{{"id", 3}}));
  // The memo answers the second call: no hook is called again.
  compiled.clear();
  timed.clear();
  EXPECT_EQ(choose(family, Mode::full), (Json{{"id", 3}}));
  EXPECT_TRUE(compiled.empty());
  EXPECT_TRUE(timed.empty());
  EXPECT_EQ(db_hits, 0);
}

TEST_F(ConfigChoice, ANewContextReadsTheRecordInsteadOfTuning) {
  const FakeFamily family("record_family");
  choose(family, Mode::full);
  int other_context = 0;  // another CUDA context: the memo does not answer
  jit::autotune::ChoiceContext c = context(Mode::full);
  c.context = &other_context;
  timed.clear();
  EXPECT_EQ(jit::autotune::choose_config(family, spec_, bucket_, c, hooks()), (Json{{"id", 3}}));
  EXPECT_TRUE(timed.empty());
  EXPECT_EQ(db_hits, 1);
}

TEST_F(ConfigChoice, FastTimesTheDefaultAndTheNextConfigsOnly) {
  const FakeFamily family("fast_family");
  choose(family, Mode::fast);
  std::vector<int> ids;
  for (const auto& [id, n] : timed) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<int>{0, 1, 2, 3}));  // default 1, then 0, 2, 3
}

TEST_F(ConfigChoice, FrozenAndCaptureNeverTimeAndCaptureIsNotMemoized) {
  const FakeFamily family("frozen_family");
  EXPECT_EQ(choose(family, Mode::frozen), (Json{{"id", 1}}));
  EXPECT_TRUE(logged("CUJIT_AUTOTUNE=frozen: default config frozen_family_1"));
  const FakeFamily captured("captured_family");
  EXPECT_EQ(choose(captured, Mode::full, /*capturing=*/true), (Json{{"id", 1}}));
  EXPECT_TRUE(timed.empty());
  EXPECT_TRUE(compiled.empty());
  // Outside the capture the same key is tuned: the capture's choice was not pinned.
  EXPECT_EQ(choose(captured, Mode::full), (Json{{"id", 3}}));
  EXPECT_EQ(tuning_runs, 1);
}

// A candidate timed in a bad moment (config 3's first two samples 4x slow)
// is re-timed before it can lose, and the stored record says so.
TEST_F(ConfigChoice, RetimedCandidatesAreKeptInTheRecord) {
  const FakeFamily family("retimed_family");
  jit::autotune::ChoiceHooks h = hooks();
  std::map<int, int> samples;  // the runner is asked for once per sample
  h.runner = [this, &samples](const Json& config) -> std::function<void()> {
    const int id = config.at("id");
    const bool disturbed = id == 3 && samples[id]++ < 2;
    return [this, id, disturbed] { clock.next_us = id == 3 ? (disturbed ? 2.0 : 0.5) : 1.0; };
  };
  const jit::autotune::ChoiceContext c = context(Mode::full);
  EXPECT_EQ(jit::autotune::choose_config(family, spec_, bucket_, c, h), (Json{{"id", 3}}));
  const std::optional<Json> record =
      jit::cache::TuningDb(tmp_).load(jit::autotune::tune_key(family, spec_, bucket_, c));
  ASSERT_TRUE(record.has_value());
  ASSERT_TRUE(record->contains("retimed")) << record->dump();
  ASSERT_EQ(record->at("retimed").size(), 1u);
  const Json& r = record->at("retimed")[0];
  EXPECT_EQ(r.at("config"), (Json{{"id", 3}}));
  EXPECT_EQ(r.at("variant"), "retimed_family_3");
  EXPECT_EQ(r.at("discarded_us"), (Json{2.0, 2.0, 0.5}));
  EXPECT_EQ(r.at("kept_us"), (Json{0.5, 0.5, 0.5}));
  EXPECT_TRUE(logged("re-timed retimed_family_3"));
}

// CUJIT_AUTOTUNE=background's first look: nothing is compiled or timed; a
// config is known from the memo or a record that timed every candidate.
TEST_F(ConfigChoice, KnownConfigNeverTunes) {
  const FakeFamily family("known_family");
  const jit::autotune::ChoiceContext c = context(Mode::full);
  EXPECT_EQ(jit::autotune::known_config(family, spec_, bucket_, c, hooks()), std::nullopt);
  EXPECT_TRUE(compiled.empty());
  EXPECT_TRUE(timed.empty());
  EXPECT_EQ(tuning_runs, 0);
  choose(family, Mode::full);  // what the worker does
  EXPECT_EQ(jit::autotune::known_config(family, spec_, bucket_, c, hooks()), (Json{{"id", 3}}));  // the memo
  // Another context: the record settles it.
  int other_context = 0;
  jit::autotune::ChoiceContext other = c;
  other.context = &other_context;
  compiled.clear();
  timed.clear();
  EXPECT_EQ(jit::autotune::known_config(family, spec_, bucket_, other, hooks()), (Json{{"id", 3}}));
  EXPECT_EQ(db_hits, 1);
  // A record that lacks a candidate does not: tuning would time it.
  const Json key = jit::autotune::tune_key(family, spec_, bucket_, c);
  Json record = *jit::cache::TuningDb(tmp_).load(key);
  record["candidates"].erase(record["candidates"].begin());
  jit::cache::TuningDb(tmp_).store(key, record);
  int third_context = 0;
  other.context = &third_context;
  EXPECT_EQ(jit::autotune::known_config(family, spec_, bucket_, other, hooks()), std::nullopt);
  EXPECT_TRUE(compiled.empty());
  EXPECT_TRUE(timed.empty());
}

// A background tuning at process exit gives up: no record, no memo, and the
// next choice tunes in full.
TEST_F(ConfigChoice, CancelledTuningKeepsNothing) {
  const FakeFamily family("cancelled_family");
  jit::autotune::ChoiceHooks h = hooks();
  h.cancelled = [this] { return compiled.size() >= 2; };
  const jit::autotune::ChoiceContext c = context(Mode::full);
  EXPECT_THROW(jit::autotune::choose_config(family, spec_, bucket_, c, h), jit::autotune::TuningCancelled);
  EXPECT_TRUE(timed.empty());
  EXPECT_FALSE(jit::cache::TuningDb(tmp_).load(jit::autotune::tune_key(family, spec_, bucket_, c)).has_value());
  EXPECT_EQ(jit::autotune::known_config(family, spec_, bucket_, c, hooks()), std::nullopt);
  EXPECT_EQ(choose(family, Mode::full), (Json{{"id", 3}}));
}

TEST_F(ConfigChoice, NoRunnableCandidateNamesEachFailure) {
  const FakeFamily family("broken_family");
  jit::autotune::ChoiceHooks h = hooks();
  h.compile = [](const Json&) { throw std::runtime_error("nvrtc said no"); };
  try {
    jit::autotune::choose_config(family, spec_, bucket_, context(Mode::full), h);
    FAIL() << "no candidate could run, yet a config was chosen";
  } catch (const jit::autotune::NoRunnableCandidate& e) {
    EXPECT_NE(std::string(e.what()).find("broken_family_0: compile failed: nvrtc said no"), std::string::npos)
        << e.what();
  }
}

}  // namespace
