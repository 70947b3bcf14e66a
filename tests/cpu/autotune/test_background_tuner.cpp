// Tests for CUJIT_AUTOTUNE=background's state machine with fake jobs and
// fake plans (autotune/background_tuner.h, autotune/served_table.h): the
// first call is served the default, a second call while the tuning is in
// flight starts none, the winner serves once ready, a failed tuning is
// logged and the default keeps serving, and shutdown neither hangs nor runs
// queued jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "autotune/background_tuner.h"
#include "autotune/served_table.h"

namespace {

using jit::autotune::BackgroundTuner;
using jit::autotune::ServedTable;
using jit::autotune::TuningTicket;
using nlohmann::json;
using State = TuningTicket::State;

// A job that blocks until released, so a test decides when tuning ends.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  void release() { open.set_value(); }
};

// What the runtime does per call, with a fake "plan": the config's name.
struct FakeCaller {
  explicit FakeCaller(BackgroundTuner& t) : tuner(t) {}

  BackgroundTuner& tuner;
  ServedTable<int, std::string, std::hash<int>> table{16};
  int makes = 0, remakes = 0;
  bool capturing = false;
  std::function<json()> job;

  std::string call(int shape) {
    return table.get(
        shape,
        [&] {
          ++makes;
          auto ticket = tuner.submit("key" + std::to_string(shape % 2), job);  // two shapes share a tune key
          return ServedTable<int, std::string, std::hash<int>>::Entry{"default", ticket, true};
        },
        [&](const json& winner) {
          ++remakes;
          return winner.get<std::string>();
        },
        [&] { return !capturing; });
  }
};

TEST(BackgroundTuning, FirstCallServesTheDefaultThenTheWinnerOnceReady) {
  BackgroundTuner tuner;
  Gate gate;
  std::atomic<int> jobs{0};
  FakeCaller caller{tuner};
  caller.job = [&] {
    ++jobs;
    gate.opened.wait();
    return json("tuned");
  };
  EXPECT_EQ(caller.call(0), "default");
  // In flight: the same shape, and another shape of the same tune key, start no tuning.
  EXPECT_EQ(caller.call(0), "default");
  EXPECT_EQ(caller.call(2), "default");
  EXPECT_EQ(caller.table.provisional(), 2u);
  gate.release();
  tuner.wait_idle();
  EXPECT_EQ(jobs.load(), 1);
  EXPECT_EQ(caller.call(0), "tuned");
  EXPECT_EQ(caller.call(0), "tuned");
  EXPECT_EQ(caller.call(2), "tuned");
  EXPECT_EQ(caller.makes, 2);
  EXPECT_EQ(caller.remakes, 2);  // once per shape, then final
  EXPECT_EQ(caller.table.provisional(), 0u);
}

TEST(BackgroundTuning, NoSwapWhileTheCallerIsCapturing) {
  BackgroundTuner tuner;
  FakeCaller caller{tuner};
  caller.job = [] { return json("tuned"); };
  EXPECT_EQ(caller.call(1), "default");
  tuner.wait_idle();
  caller.capturing = true;
  EXPECT_EQ(caller.call(1), "default");
  EXPECT_EQ(caller.remakes, 0);
  caller.capturing = false;
  EXPECT_EQ(caller.call(1), "tuned");
}

TEST(BackgroundTuning, AFailedTuningIsLoggedAndTheDefaultKeepsServing) {
  std::vector<std::string> lines;
  std::mutex mutex;
  jit::autotune::TuningLog log;
  log.level = jit::autotune::TuningLog::info;
  log.write = [&](int, const std::string& line) {
    std::lock_guard lock(mutex);
    lines.push_back(line);
  };
  BackgroundTuner tuner(log);
  std::atomic<int> jobs{0};
  FakeCaller caller{tuner};
  caller.job = [&]() -> json {
    ++jobs;
    throw std::runtime_error("no candidate could run");
  };
  EXPECT_EQ(caller.call(3), "default");
  tuner.wait_idle();
  EXPECT_EQ(caller.call(3), "default");
  EXPECT_EQ(caller.call(3), "default");
  EXPECT_EQ(caller.table.provisional(), 0u);  // settled on the default: no more asking
  EXPECT_EQ(caller.remakes, 0);
  EXPECT_EQ(jobs.load(), 1);  // not retried
  std::lock_guard lock(mutex);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("background tuning of key1 failed, the default config keeps serving it: no candidate could "
                          "run"),
            std::string::npos)
      << lines[0];
}

TEST(BackgroundTuning, JobsRunOneAtATimeOffTheCallingThread) {
  BackgroundTuner tuner;
  std::atomic<int> running{0}, peak{0};
  std::vector<std::shared_ptr<const TuningTicket>> tickets;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  for (int i = 0; i < 4; ++i) {
    tickets.push_back(tuner.submit("k" + std::to_string(i), [&, i] {
      peak = std::max(peak.load(), ++running);
      on_caller = on_caller || std::this_thread::get_id() == caller;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
      return json(i);
    }));
  }
  tuner.wait_idle();
  EXPECT_EQ(peak.load(), 1);
  EXPECT_FALSE(on_caller.load());
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(tickets[i]->state(), State::ready);
    EXPECT_EQ(tickets[i]->winner(), json(i));
  }
}

// Destroying the tuner (process exit) with one job running and one queued:
// the running job sees stopping() and ends early, the queued one never runs
// and its ticket fails; the destructor returns.
TEST(BackgroundTuning, ShutdownStopsTheRunningJobAndDropsQueuedOnes) {
  std::shared_ptr<const TuningTicket> first, second;
  std::atomic<bool> second_ran{false};
  std::promise<void> started;
  auto tuner = std::make_unique<BackgroundTuner>();
  BackgroundTuner* raw = tuner.get();
  first = tuner->submit("a", [&]() -> json {
    started.set_value();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!raw->stopping()) {
      if (std::chrono::steady_clock::now() > deadline) return json("never stopped");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    throw std::runtime_error("stopped");
  });
  second = tuner->submit("b", [&] {
    second_ran = true;
    return json(1);
  });
  started.get_future().wait();
  const auto begin = std::chrono::steady_clock::now();
  tuner.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
  EXPECT_EQ(first->state(), State::failed);
  EXPECT_EQ(first->error(), "stopped");
  EXPECT_EQ(second->state(), State::failed);
  EXPECT_FALSE(second_ran.load());
}

TEST(BackgroundTuning, AnIdleTunerShutsDownAtOnce) {
  { BackgroundTuner never_used; }
  BackgroundTuner tuner;
  tuner.submit("x", [] { return json(1); });
  tuner.wait_idle();
}

}  // namespace
