#include "autotune/tuner.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "autotune/outliers.h"

namespace jit::autotune {
namespace {

// Re-times, once each, the fresh candidates whose first samples are not to
// be believed (autotune/outliers.h): their samples are dropped and
// kTimingRounds new ones taken, which count whatever they say.
template <class TimeRounds>
void retime_outliers(TuneResult& result, const std::vector<std::size_t>& fresh,
                     std::vector<std::vector<double>>& samples, const TuneHooks& hooks, TimeRounds& time_rounds) {
  std::vector<SampledCandidate> sampled(result.candidates.size());
  for (std::size_t i = 0; i < sampled.size(); ++i) {
    const TimedCandidate& c = result.candidates[i];
    sampled[i].tile_class = hooks.tile_class ? hooks.tile_class(c.config) : c.variant;
    if (!c.error.empty()) continue;
    sampled[i].samples = samples[i];
    sampled[i].median_us = c.median_us;
  }
  std::vector<std::size_t> suspects;
  for (std::size_t i : fresh) {
    if (std::optional<std::string> why = why_retime(sampled, i)) {
      const TimedCandidate& c = result.candidates[i];
      result.retimed.push_back(Retimed{c.config, c.variant, std::move(*why), std::move(samples[i]), {}});
      samples[i].clear();
      suspects.push_back(i);
    }
  }
  if (suspects.empty()) return;
  time_rounds(suspects, kTimingRounds);
  for (std::size_t k = 0; k < suspects.size(); ++k) result.retimed[k].kept_us = samples[suspects[k]];
}

}  // namespace

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
  std::vector<std::string> spills(configs.size());  // why a compiled candidate spills
  parallel_for(fresh.size(), threads, [&](std::size_t k) {
    TimedCandidate& c = result.candidates[fresh[k]];
    try {
      hooks.compile(c.config);
    } catch (const SpillingCandidate& e) {
      spills[fresh[k]] = e.what();
    } catch (const std::exception& e) {
      c.error = std::string("compile failed: ") + e.what();
    }
  });
  result.compiled = int(fresh.size());
  bool one_without_spills = false;  // reused timings count: they ran
  for (std::size_t i = 0; i < configs.size(); ++i) {
    one_without_spills |= result.candidates[i].error.empty() && spills[i].empty();
  }
  for (std::size_t i = 0; one_without_spills && i < configs.size(); ++i) {
    if (!spills[i].empty()) result.candidates[i].error = "left out: " + spills[i];
  }
  std::vector<std::vector<double>> samples(configs.size());
  // Rounds over `which`, alternately forward and backward.
  auto time_rounds = [&](const std::vector<std::size_t>& which, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t k = 0; k < which.size(); ++k) {
        const std::size_t i = which[round % 2 == 0 ? k : which.size() - 1 - k];
        TimedCandidate& c = result.candidates[i];
        if (!c.error.empty()) continue;
        try {
          samples[i].push_back(hooks.time_us(c.config));
        } catch (const std::exception& e) {
          c.error = std::string("timing failed: ") + e.what();
        }
      }
    }
    for (std::size_t i : which) {
      TimedCandidate& c = result.candidates[i];
      if (c.error.empty()) c.median_us = median(samples[i]);
    }
  };
  time_rounds(fresh, kTimingRounds);
  retime_outliers(result, fresh, samples, hooks, time_rounds);

  // The playoff: fresh candidates near the fastest (which may be a reused one).
  double best = 0;
  for (const TimedCandidate& c : result.candidates) {
    if (c.error.empty() && c.median_us > 0 && (best == 0 || c.median_us < best)) best = c.median_us;
  }
  std::vector<std::size_t> finalists;
  for (std::size_t i : fresh) {
    const TimedCandidate& c = result.candidates[i];
    if (c.error.empty() && c.median_us <= best * (1 + kFinalistWindow)) finalists.push_back(i);
  }
  std::stable_sort(finalists.begin(), finalists.end(), [&](std::size_t a, std::size_t b) {
    return result.candidates[a].median_us < result.candidates[b].median_us;
  });
  if (finalists.size() > kMaxFinalists) finalists.resize(kMaxFinalists);
  if (finalists.size() >= 2) time_rounds(finalists, kPlayoffRounds);
  for (std::size_t i : fresh) result.timed += result.candidates[i].error.empty();
  result.winner = select_winner(result.candidates);
  return result;
}

}  // namespace jit::autotune
