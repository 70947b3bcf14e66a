// Choosing a winner among timed candidates, deterministically: every config
// within `tolerance` of the fastest ties, and ties go to the earliest in
// config-space order, so repeated tunings and different ranks agree.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jit::autotune {

struct TimedCandidate {
  nlohmann::json config;
  std::string variant;
  double median_us = 0;  // valid when error is empty
  std::string error;     // why it could not be timed (compile or launch failure)
};

// Small: a tie costs up to this much. At 2% the rule picked configs that
// sustained runs measured 4-6% slower than the fastest (docs/perf-log.md);
// the tuner's playoff makes the finalists' times steady enough for 0.5%.
inline constexpr double kTieTolerance = 0.005;

std::optional<std::size_t> select_winner(const std::vector<TimedCandidate>& candidates,
                                         double tolerance = kTieTolerance);

double median(std::vector<double> samples);

}  // namespace jit::autotune
