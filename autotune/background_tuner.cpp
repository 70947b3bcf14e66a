#include "autotune/background_tuner.h"

#include <exception>
#include <utility>

namespace jit::autotune {

BackgroundTuner::BackgroundTuner(TuningLog log) : log_(std::move(log)) {}

BackgroundTuner::~BackgroundTuner() {
  std::deque<Pending> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
    dropped.swap(queue_);
    changed_.notify_all();
  }
  for (Pending& p : dropped) {
    p.ticket->error_ = "the process is exiting";
    settle(*p.ticket, TuningTicket::State::failed);
  }
  if (worker_.joinable()) worker_.join();
}

void BackgroundTuner::settle(TuningTicket& ticket, TuningTicket::State state) {
  ticket.state_.store(state, std::memory_order_release);
}

std::shared_ptr<const TuningTicket> BackgroundTuner::submit(const std::string& key, Job job) {
  std::lock_guard lock(mutex_);
  if (auto it = tickets_.find(key); it != tickets_.end()) return it->second;
  auto ticket = std::make_shared<TuningTicket>();
  if (stopping_.load(std::memory_order_relaxed)) {
    ticket->error_ = "the process is exiting";
    settle(*ticket, TuningTicket::State::failed);
    return ticket;
  }
  tickets_.emplace(key, ticket);
  queue_.push_back(Pending{key, std::move(job), ticket});
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  changed_.notify_all();
  return ticket;
}

void BackgroundTuner::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void BackgroundTuner::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !queue_.empty() || stopping_.load(std::memory_order_relaxed); });
    if (queue_.empty()) return;  // stopping, nothing left
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      p.ticket->winner_ = p.job();
      settle(*p.ticket, TuningTicket::State::ready);
    } catch (const std::exception& e) {
      // The default config keeps serving this key; the reason goes to the log.
      p.ticket->error_ = e.what();
      settle(*p.ticket, TuningTicket::State::failed);
      log_.info_line("background tuning of {} failed, the default config keeps serving it: {}", p.key, e.what());
    } catch (...) {
      p.ticket->error_ = "unknown exception";
      settle(*p.ticket, TuningTicket::State::failed);
      log_.info_line("background tuning of {} failed, the default config keeps serving it", p.key);
    }
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace jit::autotune
