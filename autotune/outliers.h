// Samples the tuner should not believe. A candidate is re-timed before it can
// lose or win when
//   - its own samples disagree: the largest is more than kSpreadLimit times
//     the smallest (a transient slowdown that hit most of its samples), or
//   - its median is more than kClassOutlierRatio times the median of the
//     other candidates of its tile class (configs that share a tile shape
//     and differ only in pipeline depth or warps run at similar speeds; one
//     far slower was measured in a bad moment). Only slower: a GPU that is
//     disturbed makes a kernel slower, never faster.
// Both limits sit far outside the spread seen between honest samples and
// between honest class-mates, so they cost nothing on a quiet GPU.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jit::autotune {

inline constexpr double kSpreadLimit = 1.5;
inline constexpr double kClassOutlierRatio = 2.0;

// Config keys that change how a tile is computed but not its shape: configs
// equal but for these share a tile class. Every family in the tree names its
// tile sizes bm/bn and its pipeline knobs stages/warps.
std::string tile_class(const nlohmann::json& config);

// One candidate as the check sees it.
struct SampledCandidate {
  std::string tile_class;
  std::vector<double> samples;  // taken now; empty for one reused from a record
  double median_us = 0;         // > 0 when it has a time (taken now or reused)
};

// Why candidate `i` should be re-timed, or nullopt. Only candidates with
// samples taken now are suspects; reused ones are class references.
std::optional<std::string> why_retime(const std::vector<SampledCandidate>& candidates, std::size_t i);

// What a re-timing threw away and what it kept, for the tuning record.
struct Retimed {
  nlohmann::json config;
  std::string variant;
  std::string reason;
  std::vector<double> discarded_us, kept_us;
};

}  // namespace jit::autotune
