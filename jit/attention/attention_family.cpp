#include "jit/attention/attention_family.h"

namespace jit::detail {

AttnPlan load_plan(const AttentionFamily& family, const AttnProblem& problem, const Json& config,
                   const Target& target) {
  AttnPlan plan = family.plan(problem, config, target);
  const Json spec = family.spec_for(problem);
  family.bind_kernels(plan, spec, get_kernel(family, spec, config));
  return plan;
}

}  // namespace jit::detail
