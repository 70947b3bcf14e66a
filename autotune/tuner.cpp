#include "autotune/tuner.h"

#include <atomic>
#include <thread>

namespace jit::autotune {

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(n)));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

TuneResult run_tuning(const std::vector<nlohmann::json>& configs, const TuneHooks& hooks,
                      const std::vector<TimedCandidate>& previous, unsigned threads) {
  TuneResult result;
  result.candidates.resize(configs.size());
  std::vector<std::size_t> fresh;  // indices that need compiling and timing
  for (std::size_t i = 0; i < configs.size(); ++i) {
    TimedCandidate& c = result.candidates[i];
    c.config = configs[i];
    c.variant = hooks.variant_name(configs[i]);
    bool reused = false;
    for (const TimedCandidate& p : previous) {
      if (p.config == configs[i] && p.error.empty() && p.median_us > 0) {
        c.median_us = p.median_us;
        reused = true;
        break;
      }
    }
    if (!reused) fresh.push_back(i);
  }
  parallel_for(fresh.size(), threads, [&](std::size_t k) {
    TimedCandidate& c = result.candidates[fresh[k]];
    try {
      hooks.compile(c.config);
    } catch (const std::exception& e) {
      c.error = std::string("compile failed: ") + e.what();
    }
  });
  result.compiled = int(fresh.size());
  std::vector<std::vector<double>> samples(configs.size());
  for (int round = 0; round < kTimingRounds; ++round) {
    for (std::size_t k = 0; k < fresh.size(); ++k) {
      const std::size_t i = fresh[round % 2 == 0 ? k : fresh.size() - 1 - k];
      TimedCandidate& c = result.candidates[i];
      if (!c.error.empty()) continue;
      try {
        samples[i].push_back(hooks.time_us(c.config));
      } catch (const std::exception& e) {
        c.error = std::string("timing failed: ") + e.what();
      }
    }
  }
  for (std::size_t i : fresh) {
    TimedCandidate& c = result.candidates[i];
    if (!c.error.empty()) continue;
    c.median_us = median(samples[i]);
    ++result.timed;
  }
  result.winner = select_winner(result.candidates);
  return result;
}

}  // namespace jit::autotune
