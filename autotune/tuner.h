// The tuning loop over a pruned space: compile every candidate in parallel
// (a thread pool the size of the machine), then time them, then select.
// Candidates already timed in a previous record are not re-timed.
//
// Timing goes in kTimingRounds rounds over all candidates, alternately
// forward and backward, and a candidate's time is the median of its rounds:
// a GPU whose clock drifts while tuning runs (it heats up, or boosts late)
// would otherwise favour whichever candidates were timed first.
//
// Three samples leave the close calls to chance: one lucky sample can put a
// config 5-10% slower ahead (a sustained run shows it). So the finalists,
// the fresh candidates within kFinalistWindow of the fastest (at most
// kMaxFinalists of them, fastest first), are timed kPlayoffRounds more
// times in the same alternating order, and their time is the median of all
// their samples. Candidates far from the fastest cost no extra time.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/selection.h"

namespace jit::autotune {

constexpr int kTimingRounds = 3;
constexpr double kFinalistWindow = 0.06;
constexpr std::size_t kMaxFinalists = 6;
constexpr int kPlayoffRounds = 4;

struct TuneHooks {
  std::function<std::string(const nlohmann::json& config)> variant_name;
  // Must be thread-safe: called from several threads at once. Throws on failure.
  std::function<void(const nlohmann::json& config)> compile;
  // Called on the calling thread only: kTimingRounds times per candidate,
  // kPlayoffRounds more per finalist.
  // Returns one sample: a median time in microseconds.
  std::function<double(const nlohmann::json& config)> time_us;
};

struct TuneResult {
  std::vector<TimedCandidate> candidates;  // in `configs` order
  std::optional<std::size_t> winner;
  int compiled = 0;  // candidates that needed the compile hook
  int timed = 0;     // candidates that were timed now (not reused)
};

TuneResult run_tuning(const std::vector<nlohmann::json>& configs, const TuneHooks& hooks,
                      const std::vector<TimedCandidate>& previous, unsigned threads);

// Runs fn(i) for i in [0, n) on up to `threads` threads; rethrows nothing
// (fn handles its own errors).
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

}  // namespace jit::autotune
