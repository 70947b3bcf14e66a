#include "jit/attention/family_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "jit/attention/decode/decode_family.h"
#include "jit/attention/portable/portable_family.h"
#include "jit/attention/sm90/sm90_family.h"
#include "jit/error.h"
#include "jit/log.h"

namespace jit::detail {
namespace {

// A faster family passing a problem to a slower one on its own target is
// worth one log line per (family, head dim) (it is slower there), not one
// per call.
void log_fallback_once(const FamilyRegistration& preferred, const FamilyRegistration& chosen,
                       std::int64_t head_dim) {
  static std::mutex mutex;
  static std::set<std::pair<const AttentionFamily*, std::int64_t>> logged;
  std::lock_guard lock(mutex);
  if (logged.insert({preferred.family, head_dim}).second) {
    log_info("the {} family does not serve this problem (head dim {}): using the {} family", preferred.short_name,
             head_dim, chosen.short_name);
  }
}

}  // namespace

const std::vector<FamilyRegistration>& attention_families() {
  // decode first: it takes only few-row and KV-cache problems, which the
  // others serve slower or not at all.
  static const std::vector<FamilyRegistration> families = {decode_registration(), sm90_registration(),
                                                           portable_registration()};
  return families;
}

std::string head_dims_text(const cujit::HeadDims& dims, const char* last_separator) {
  std::string text;
  for (int i = 0; i < dims.count; ++i) {
    if (i > 0) text += i + 1 == dims.count ? last_separator : ", ";
    text += std::to_string(dims.values[i]);
  }
  return text;
}

const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target) {
  return attention_family_for(problem, target, knobs().family);
}

const AttentionFamily& first_call_family_for(const AttnProblem& problem, const Target& target) {
  const AttentionFamily& tuned = attention_family_for(problem, target);
  if (!knobs().family.empty() || &tuned != &sm90_attention_family()) return tuned;
  const AttentionFamily& portable = portable_attention_family();
  return portable.supports(problem, target) ? portable : tuned;
}

const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target,
                                            const std::string& forced_name) {
  const std::vector<FamilyRegistration>& families = attention_families();
  if (!forced_name.empty()) {
    const auto forced = std::find_if(families.begin(), families.end(),
                                     [&](const FamilyRegistration& r) { return forced_name == r.short_name; });
    if (forced == families.end()) {
      std::string names = "auto";
      for (const FamilyRegistration& r : families) names += fmt::format(", {}", r.short_name);
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("CUJIT_FAMILY='{}' names no attention family; it is one of {}", forced_name, names));
    }
    if (forced->family->supports(problem, target)) return *forced->family;
    // A forced family that says what it needs names it in the error; the
    // others fall through to the common error below.
    if (forced->requirements != nullptr) {
      throw Error(ErrorCode::Unsupported,
                  fmt::format("CUJIT_FAMILY={}, but the {} family needs {}; unset CUJIT_FAMILY to use any family",
                              forced->short_name, forced->short_name, forced->requirements(problem, target)));
    }
  } else {
    // A long chunk over a KV cache: the sm90 family's prefill tiles, where
    // the decode family (first in the list, which serves every cache
    // problem) would pack rows made for decode.
    if (sm90_serves_kv_chunk(problem, target)) return sm90_attention_family();
    // The first that runs on this target but not at this head dim: a slower
    // family serving its problem is worth a log line.
    const FamilyRegistration* preferred = nullptr;
    for (const FamilyRegistration& r : families) {
      if (!r.runs_on(target)) continue;
      if (preferred == nullptr && !r.head_dims.contains(int(problem.head_dim))) preferred = &r;
      if (r.family->supports(problem, target)) {
        if (preferred != nullptr) log_fallback_once(*preferred, r, problem.head_dim);
        return *r.family;
      }
    }
  }
  // A family here has the head dim but not this problem's kind: say what it
  // needs.
  for (const FamilyRegistration& r : families) {
    if (r.runs_on(target) && r.head_dims.contains(int(problem.head_dim)) && r.requirements != nullptr) {
      throw Error(ErrorCode::Unsupported,
                  fmt::format("no attention kernel family serves this problem on {}: head dim {} has only the {} "
                              "family, which needs {}",
                              target.arch, problem.head_dim, r.short_name, r.requirements(problem, target)));
    }
  }
  // Every head dim some family runs on this target, in order.
  std::set<int> seen;
  for (const FamilyRegistration& r : families) {
    if (!r.runs_on(target)) continue;
    for (int i = 0; i < r.head_dims.count; ++i) seen.insert(r.head_dims.values[i]);
  }
  std::string dims;
  for (int d : seen) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  throw Error(ErrorCode::Unsupported, fmt::format("no attention kernel family handles head dim {} on {} (supported "
                                                  "head dims: {})",
                                                  problem.head_dim, target.arch, dims));
}

}  // namespace jit::detail
