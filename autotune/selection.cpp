#include "autotune/selection.h"

#include <algorithm>
#include <limits>

namespace jit::autotune {

std::optional<std::size_t> select_winner(const std::vector<TimedCandidate>& candidates, double tolerance) {
  double best = std::numeric_limits<double>::infinity();
  for (const TimedCandidate& c : candidates) {
    if (c.error.empty() && c.median_us > 0) best = std::min(best, c.median_us);
  }
  if (best == std::numeric_limits<double>::infinity()) return std::nullopt;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const TimedCandidate& c = candidates[i];
    if (c.error.empty() && c.median_us > 0 && c.median_us <= best * (1 + tolerance)) return i;
  }
  return std::nullopt;  // unreachable: the best itself qualifies
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  const auto mid = samples.begin() + samples.size() / 2;
  std::nth_element(samples.begin(), mid, samples.end());
  if (samples.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(samples.begin(), mid)) / 2;
}

}  // namespace jit::autotune
