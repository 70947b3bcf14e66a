// Kernel families that implement attention, and how jit::attention picks one.
#pragma once
#include <string>

#include "jit/attention_problem.h"
#include "jit/kernel_family.h"

namespace jit::detail {

// An attention family: a KernelFamily that also knows its launch geometry
// and which problems it serves.
class AttentionFamily : public KernelFamily {
 public:
  virtual bool supports(const AttnProblem& problem, const Target& target) const = 0;
  virtual LaunchGeometry geometry(const AttnProblem& problem, const Json& config) const = 0;
  // The specialization of a problem (dtype, head dim, causal).
  static Json spec_of(const AttnProblem& problem);
};

// The portable family (mma.sync, cp.async): sm_80 and newer.
const AttentionFamily& portable_attention_family();

// The family for a problem on a target; Error(Unsupported) when none fits.
const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target);

// Kernel sources embedded at build time, shared by the attention families.
const KernelSources& attention_sources(const std::string& entry);

}  // namespace jit::detail
