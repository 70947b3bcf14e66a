// CUJIT_AUTOTUNE=background: tuning jobs run one at a time on a worker
// thread while callers are served a default config. One job per key: a key
// already queued, running or done is not tuned again, and every caller that
// asks for it shares one ticket, whose state a hot path reads with one
// atomic load.
//
// What a job does (compile, time on its own stream and buffers, record) is
// the runtime's, passed in as a function; this module owns only the queue,
// the deduplication, the tickets and shutdown, so it is tested on the CPU.
//
// Shutdown (the destructor, at process exit for the runtime's instance):
// queued jobs are dropped and their tickets fail; `stopping()` turns true, so
// the running job can give up between candidates; then the worker is joined.
// Exit waits at most for the step of the running job in progress.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "autotune/tuning_log.h"

namespace jit::autotune {

// The outcome of one key's background tuning, shared by everything waiting
// for it. The winner and error are written once, before the state leaves
// `running` (release), and read only after (acquire).
class TuningTicket {
 public:
  enum class State { running, ready, failed };
  State state() const { return state_.load(std::memory_order_acquire); }
  // Valid once state() is ready.
  const nlohmann::json& winner() const { return winner_; }
  // Valid once state() is failed.
  const std::string& error() const { return error_; }

 private:
  friend class BackgroundTuner;
  std::atomic<State> state_{State::running};
  nlohmann::json winner_;
  std::string error_;
};

class BackgroundTuner {
 public:
  // Tunes and returns the winner; throws on failure. Runs on the worker.
  using Job = std::function<nlohmann::json()>;

  explicit BackgroundTuner(TuningLog log = {});
  ~BackgroundTuner();
  BackgroundTuner(const BackgroundTuner&) = delete;
  BackgroundTuner& operator=(const BackgroundTuner&) = delete;

  // The ticket for `key`: the existing one when the key was submitted
  // before (whatever its state), else a new one whose job is queued.
  std::shared_ptr<const TuningTicket> submit(const std::string& key, Job job);

  // Blocks until no job is queued or running.
  void wait_idle();

  // True once shutdown has begun: a running job should stop early.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

 private:
  struct Pending {
    std::string key;
    Job job;
    std::shared_ptr<TuningTicket> ticket;
  };
  void work();
  static void settle(TuningTicket& ticket, TuningTicket::State state);

  TuningLog log_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<TuningTicket>> tickets_;
  std::deque<Pending> queue_;
  bool busy_ = false;
  std::atomic<bool> stopping_{false};
  std::thread worker_;  // started by the first submit
};

}  // namespace jit::autotune
