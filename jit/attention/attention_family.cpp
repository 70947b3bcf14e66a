#include "jit/attention/attention_family.h"

#include <map>
#include <mutex>

#include "jit/embedded_kernel_sources.h"

namespace jit::detail {

AttnPlan load_plan(const AttentionFamily& family, const AttnProblem& problem, const Json& config,
                   const Target& target) {
  AttnPlan plan = family.plan(problem, config, target);
  const Json spec = family.spec_for(problem);
  family.bind_kernels(plan, spec, get_kernel(family, spec, config));
  return plan;
}

const KernelSources& attention_sources(const std::string& entry) {
  static std::mutex mutex;
  static std::map<std::string, KernelSources> by_entry;
  std::lock_guard lock(mutex);
  auto [it, inserted] = by_entry.try_emplace(entry);
  if (inserted) {
    it->second.entry = entry;
    it->second.files = cujit::embedded::kernel_files();
  }
  return it->second;
}

}  // namespace jit::detail
