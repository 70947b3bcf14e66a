#include "jit/attention_family.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <set>

#include "jit/embedded_kernel_sources.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/log.h"

namespace jit::detail {
namespace {

// The portable family serving an sm_90a problem is worth one log line (it is
// slower there), not one per call.
void log_once_per_head_dim(std::int64_t head_dim) {
  static std::mutex mutex;
  static std::set<std::int64_t> logged;
  std::lock_guard lock(mutex);
  if (logged.insert(head_dim).second) {
    log_info("the sm90 family does not serve this problem (head dim {}): using the portable family", head_dim);
  }
}

}  // namespace

Json AttentionFamily::spec_of(const AttnProblem& problem) {
  return {{"dtype", problem.dtype == DType::f16 ? "f16" : "bf16"},
          {"d", problem.head_dim},
          {"causal", problem.causal}};
}

AttentionFamily::Spec AttentionFamily::spec_from(const Json& spec) {
  return {spec.at("dtype"), spec.at("d"), spec.at("causal")};
}

const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target) {
  const AttentionFamily& sm90 = sm90_attention_family();
  const AttentionFamily& portable = portable_attention_family();
  const FamilyChoice choice = knobs().family;
  const bool sm90_ok = sm90.supports(problem, target);
  const bool portable_ok = portable.supports(problem, target);
  if (choice == FamilyChoice::sm90) {
    if (sm90_ok) return sm90;
    throw Error(ErrorCode::Unsupported,
                fmt::format("CUJIT_FAMILY=sm90, but the sm90 family needs an sm_90a GPU (this is {}) and head dim 64, "
                            "128 or 256 (this is {}); unset CUJIT_FAMILY to use any family",
                            target.arch, problem.head_dim));
  }
  if (choice == FamilyChoice::automatic && sm90_ok) return sm90;
  if (portable_ok) {
    if (choice == FamilyChoice::automatic && target.arch == "sm_90a") {
      log_once_per_head_dim(problem.head_dim);
    }
    return portable;
  }
  throw Error(ErrorCode::Unsupported,
              fmt::format("no attention kernel family handles head dim {} on {} (supported head dims: 64, 128{})",
                          problem.head_dim, target.arch, target.arch == "sm_90a" ? ", 256" : ""));
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
