#include "autotune/outliers.h"

#include <fmt/format.h>

#include <algorithm>

#include "autotune/selection.h"

namespace jit::autotune {

std::string tile_class(const nlohmann::json& config) {
  nlohmann::json shape = config;
  if (shape.is_object()) {
    shape.erase("stages");
    shape.erase("warps");
  }
  return shape.dump();
}

std::optional<std::string> why_retime(const std::vector<SampledCandidate>& candidates, std::size_t i) {
  const SampledCandidate& c = candidates[i];
  if (c.samples.empty() || !(c.median_us > 0)) return std::nullopt;
  const auto [low, high] = std::minmax_element(c.samples.begin(), c.samples.end());
  if (*low > 0 && *high > kSpreadLimit * *low) {
    return fmt::format("its samples spread {:.2f}x ({:.1f} to {:.1f} us)", *high / *low, *low, *high);
  }
  std::vector<double> mates;
  for (std::size_t j = 0; j < candidates.size(); ++j) {
    if (j != i && candidates[j].median_us > 0 && candidates[j].tile_class == c.tile_class) {
      mates.push_back(candidates[j].median_us);
    }
  }
  if (mates.empty()) return std::nullopt;
  const double reference = median(mates);
  const double ratio = c.median_us / reference;
  if (ratio > kClassOutlierRatio) {
    return fmt::format("its median {:.1f} us is {:.2f}x its tile class's {:.1f} us", c.median_us, ratio, reference);
  }
  return std::nullopt;
}

}  // namespace jit::autotune
