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
//
// Before the playoff picks finalists, a fresh candidate whose samples are
// not to be believed (they spread widely, or its time is far from its tile
// class's: autotune/outliers.h) is re-timed: its samples are dropped and
// kTimingRounds new ones taken, in the same alternating rounds over all the
// suspects. A candidate is re-timed at most once per tuning run and the new
// samples count whatever they say, so an honestly slow config (or class) is
// never re-timed again, and the extra cost is bounded: at most kTimingRounds
// more samples per fresh candidate, i.e. at worst the first pass twice over
// (on a quiet GPU, nothing). TuneResult::retimed says which candidates were
// re-timed, why, and the samples dropped and kept; the tuning record keeps it.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/outliers.h"
#include "autotune/selection.h"

namespace jit::autotune {

constexpr int kTimingRounds = 3;
constexpr double kFinalistWindow = 0.06;
constexpr std::size_t kMaxFinalists = 6;
constexpr int kPlayoffRounds = 4;

// What a compile hook throws for a candidate that compiled but spills
// registers to local memory (its ptxas report). Such a candidate is left out
// while any other compiled without spilling, so a tuned plan never runs a
// spilling kernel; when every candidate spills they are all timed as usual.
// The pruning means to keep spilling configs out, but ptxas decides, and
// its choices move with its version and near its register limits.
struct SpillingCandidate : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TuneHooks {
  std::function<std::string(const nlohmann::json& config)> variant_name;
  // Must be thread-safe: called from several threads at once. Throws on
  // failure, SpillingCandidate for a compile that spills.
  std::function<void(const nlohmann::json& config)> compile;
  // Called on the calling thread only: kTimingRounds times per candidate,
  // kTimingRounds more per re-timed one, kPlayoffRounds more per finalist.
  // Returns one sample: a median time in microseconds.
  std::function<double(const nlohmann::json& config)> time_us;
  // The config's tile class (autotune::tile_class for the families in the
  // tree); unset, each candidate is its own class.
  std::function<std::string(const nlohmann::json& config)> tile_class;
};

struct TuneResult {
  std::vector<TimedCandidate> candidates;  // in `configs` order
  std::optional<std::size_t> winner;
  int compiled = 0;  // candidates that needed the compile hook
  int timed = 0;     // candidates that were timed now (not reused)
  std::vector<Retimed> retimed;  // in the order they were found
};

TuneResult run_tuning(const std::vector<nlohmann::json>& configs, const TuneHooks& hooks,
                      const std::vector<TimedCandidate>& previous, unsigned threads);

// Runs fn(i) for i in [0, n) on up to `threads` threads; rethrows nothing
// (fn handles its own errors).
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

}  // namespace jit::autotune
