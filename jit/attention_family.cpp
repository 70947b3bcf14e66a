#include "jit/attention_family.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "jit/embedded_kernel_sources.h"
#include "jit/error.h"

namespace jit::detail {

Json AttentionFamily::spec_of(const AttnProblem& problem) {
  return {{"dtype", problem.dtype == DType::f16 ? "f16" : "bf16"},
          {"d", problem.head_dim},
          {"causal", problem.causal}};
}

const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target) {
  const AttentionFamily& portable = portable_attention_family();
  if (portable.supports(problem, target)) return portable;
  throw Error(ErrorCode::Unsupported,
              fmt::format("no attention kernel family handles head dim {} on {} (supported head dims: 64, 128)",
                          problem.head_dim, target.arch));
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
