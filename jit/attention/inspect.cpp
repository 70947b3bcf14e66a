// jit/attention_inspect.h: the call path's pieces, exported for tools.
#include "jit/attention_inspect.h"

#include <memory>

#include "autotune/prune.h"
#include "jit/attention/attention_problem.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/tensor_placement.h"
#include "jit/device.h"

namespace jit {
namespace {

struct Located {
  detail::AttnProblem problem;
  const detail::AttentionFamily* family;
  Target target;
};

Located locate(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
               const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, out, options);
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_placement(q, k, v, out, options.lse, device);
  return {problem, &detail::attention_family_for(problem, device.target), device.target};
}

}  // namespace

std::vector<AttentionLaunch> attention_launches(const TensorView& q, const TensorView& k, const TensorView& v,
                                                const TensorView& out, const AttentionOptions& options,
                                                const Json& config) {
  const Located l = locate(q, k, v, out, options);
  const detail::AttnPlan plan = l.family->plan(l.problem, config, l.target);
  std::vector<AttentionLaunch> launches;
  for (int i = 0; i < plan.step_count; ++i) {
    const detail::AttnStep& step = plan.steps[std::size_t(i)];
    launches.push_back({step.geometry, step.params_bytes, step.params_align});
  }
  return launches;
}

std::vector<AttentionPlan> attention_candidates(const TensorView& q, const TensorView& k, const TensorView& v,
                                                const TensorView& out, const AttentionOptions& options) {
  const Located l = locate(q, k, v, out, options);
  const Json spec = l.family->spec_for(l.problem);
  std::vector<AttentionPlan> candidates;
  for (const Json& config : autotune::prune_space(*l.family, spec, l.target).kept) {
    candidates.push_back({l.family->name(), l.family->variant_name(spec, config), config});
  }
  return candidates;
}

std::function<void()> attention_call_with_config(const TensorView& q, const TensorView& k, const TensorView& v,
                                                 const TensorView& out, const AttentionOptions& options,
                                                 const Json& config) {
  const Located l = locate(q, k, v, out, options);
  const detail::AttnPlan plan = detail::load_plan(*l.family, l.problem, config, l.target);
  auto workspace = std::make_shared<DeviceBuffer>(plan.workspace_bytes);
  return [=, family = l.family, problem = l.problem] {
    family->launch(plan, problem, {q, k, v, out, options.lse}, workspace->data(), options.stream);
  };
}

void check_attention_arguments(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options) {
  (void)detail::validate_attention(q, k, v, out, options);
}

void check_attention_placement(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options) {
  detail::check_placement(q, k, v, out, options.lse, detail::current_device());
}

}  // namespace jit
