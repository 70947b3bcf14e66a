#include "autotune/prune.h"

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

}  // namespace jit::autotune
