// jit::attention: validate -> device -> family -> tune key -> config ->
// kernel -> launch (ARCHITECTURE.md, "One call, end to end").
#include "jit/attention.h"

#include "jit/attention_family.h"
#include "jit/attention_problem.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"

namespace jit {
namespace {

struct Prepared {
  detail::AttnProblem problem;
  const detail::AttentionFamily* family = nullptr;
  Json spec;
  Json config;
};

Prepared prepare(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                 const AttentionOptions& options) {
  Prepared p;
  p.problem = detail::validate_attention(q, k, v, out, options);
  if (p.problem.empty()) return p;
  const detail::DeviceInfo& device = detail::current_device();
  p.family = &detail::attention_family_for(p.problem, device.target);
  p.spec = detail::AttentionFamily::spec_of(p.problem);
  const detail::AttnProblem& problem = p.problem;
  const detail::AttentionFamily& family = *p.family;
  // Candidates are timed on the caller's inputs but write to scratch outputs,
  // never to `out` or the caller's LSE.
  std::optional<DeviceBuffer> scratch_out;
  TensorView scratch_view;
  auto run = [&](const Kernel& kernel, const Json& config, Stream stream) {
    if (!scratch_out) {
      scratch_out.emplace(std::size_t(q.numel()) * element_size(q.dtype));
      scratch_view = TensorView::bhsd(scratch_out->data(), q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    }
    const cujit::AttnParams params = detail::make_attn_params(problem, q, k, v, scratch_view, nullptr);
    kernel.launch(family.geometry(problem, config), params, stream);
  };
  p.config = choose_config(family, p.spec, detail::attention_bucket(problem), run, options.stream);
  return p;
}

}  // namespace

void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
               const AttentionOptions& options) {
  const Prepared p = prepare(q, k, v, out, options);
  if (p.problem.empty()) return;  // nothing to compute, nothing launched
  const Kernel& kernel = get_kernel(*p.family, p.spec, p.config);
  const cujit::AttnParams params = detail::make_attn_params(p.problem, q, k, v, out, options.lse);
  kernel.launch(p.family->geometry(p.problem, p.config), params, options.stream);
}

DeviceTensor attention(const TensorView& q, const TensorView& k, const TensorView& v,
                       const AttentionOptions& options) {
  DeviceTensor out;
  out.buffer = DeviceBuffer(std::size_t(std::max<std::int64_t>(q.numel(), 0)) * element_size(q.dtype));
  out.view = TensorView::bhsd(out.buffer.data(), q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
  attention(q, k, v, out.view, options);
  return out;
}

AttentionPlan plan_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                             const AttentionOptions& options) {
  const Prepared p = prepare(q, k, v, out, options);
  if (p.problem.empty()) return {};
  return {p.family->name(), p.family->variant_name(p.spec, p.config), p.config};
}

}  // namespace jit
