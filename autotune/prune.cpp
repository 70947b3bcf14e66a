#include "autotune/prune.h"

#include <algorithm>

namespace jit::autotune {

PrunedSpace prune_space(const KernelFamily& family, const Json& spec, const Target& target) {
  PrunedSpace space;
  for (Json& config : family.config_space(spec)) {
    if (auto reason = family.why_pruned(spec, config, target)) {
      space.pruned.emplace_back(std::move(config), std::move(*reason));
    } else {
      space.kept.push_back(std::move(config));
    }
  }
  return space;
}

std::vector<Json> shortlist(const Json& first, const std::vector<Json>& kept, std::size_t k) {
  std::vector<Json> list;
  if (k == 0) return list;
  list.push_back(first);
  for (const Json& config : kept) {
    if (list.size() >= k) break;
    if (std::find(list.begin(), list.end(), config) == list.end()) list.push_back(config);
  }
  return list;
}

}  // namespace jit::autotune
