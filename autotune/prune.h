// Static pruning of a family's config space for one target, with reasons.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/kernel_family.h"

namespace jit::autotune {

struct PrunedSpace {
  std::vector<Json> kept;                                // in config-space order
  std::vector<std::pair<Json, std::string>> pruned;      // config, reason
};

PrunedSpace prune_space(const KernelFamily& family, const Json& spec, const Target& target);

// What CUJIT_AUTOTUNE=fast times: `first` (the default config), then the
// kept configs in space order, `k` in all, without repeats.
std::vector<Json> shortlist(const Json& first, const std::vector<Json>& kept, std::size_t k);

}  // namespace jit::autotune
