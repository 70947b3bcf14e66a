#include "jit/attention/attention_family.h"

namespace jit::detail {

AttnPlan load_plan(const AttentionFamily& family, const AttnProblem& problem, const Json& config,
                   const Target& target) {
  AttnPlan plan = family.plan(problem, config, target);
  const Json spec = family.spec_for(problem);
  family.bind_kernels(plan, spec, get_kernel(family, spec, config));
  return plan;
}

void set_fp8_descales(cujit::AttnParams& params, const AttnTensors& tensors) {
  params.q_descale = tensors.q_descale;
  params.k_descale = tensors.k_descale;
  params.v_descale = tensors.v_descale;
  params.descale_stride[0] = tensors.descale_strides[0];
  params.descale_stride[1] = tensors.descale_strides[1];
}

}  // namespace jit::detail
