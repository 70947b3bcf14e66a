// jit::attention and jit::attention_varlen: validate -> device -> family ->
// tune key -> config -> plan -> launch (docs/architecture.md, "The call path").
#include "jit/attention.h"

#include <mutex>
#include <unordered_map>

#include "jit/attention/attention_problem.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/shape_key.h"
#include "jit/attention/stream_workspace.h"
#include "jit/attention/tensor_placement.h"
#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/varlen.h"

namespace jit {
namespace {

struct Prepared {
  const detail::AttentionFamily* family = nullptr;
  Json spec;
  Json config;
};

// Steps 3-5 for a validated, non-empty problem; `t` holds the caller's
// tensors (candidates never write its out or lse).
Prepared prepare(const detail::AttnProblem& problem, const detail::AttnTensors& t, Stream stream,
                 const Target& target) {
  const TensorView& q = t.q;
  Prepared p;
  p.family = &detail::attention_family_for(problem, target);
  p.spec = p.family->spec_for(problem);
  const detail::AttentionFamily& family = *p.family;
  // Candidates are timed on the caller's inputs but write to a scratch
  // output, never to `out` or the caller's LSE.
  std::optional<DeviceBuffer> scratch_out, scratch_workspace;
  TensorView scratch_view;
  auto run = [&](const Kernel& kernel, const Json& config, Stream s) {
    if (!scratch_out) {
      scratch_out.emplace(std::size_t(q.numel()) * element_size(q.dtype));
      scratch_view = TensorView::bhsd(scratch_out->data(), q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    }
    detail::AttnPlan plan = family.plan(problem, config, target);
    family.bind_kernels(plan, p.spec, kernel);
    if (!scratch_workspace || scratch_workspace->size() < plan.workspace_bytes) {
      scratch_workspace.emplace(plan.workspace_bytes);
    }
    family.launch(plan, problem, {t.q, t.k, t.v, scratch_view, nullptr, nullptr, 0, nullptr, t.cu_seqlens_q,
                                  t.cu_seqlens_k},
                  scratch_workspace->data(), s);
  };
  p.config = choose_config(family, p.spec, family.bucket(problem), run, stream);
  return p;
}

// The hot path: the plan (kernels, launch geometry, scheduler facts) of an
// exact problem seen before on this context (detail::ShapeKey), so a repeated
// call skips tune-key hashing and JSON.
struct Launchable {
  const detail::AttentionFamily* family;
  detail::AttnPlan plan;
};

Launchable launchable_for(const detail::AttnProblem& problem, const detail::AttnTensors& t, Stream stream,
                          const detail::DeviceInfo& device) {
  constexpr std::size_t kMaxShapes = 4096;  // varying lengths must not grow it without bound
  static std::mutex mutex;
  static std::unordered_map<detail::ShapeKey, Launchable, detail::ShapeKeyHash> shapes;
  const detail::ShapeKey key{device.context, problem};
  {
    std::lock_guard lock(mutex);
    if (auto it = shapes.find(key); it != shapes.end()) return it->second;
  }
  const Prepared p = prepare(problem, t, stream, device.target);
  const Launchable launchable{p.family, detail::load_plan(*p.family, problem, p.config, device.target)};
  // A config chosen during graph capture was not tuned: do not pin it.
  if (detail::stream_is_capturing(stream)) return launchable;
  std::lock_guard lock(mutex);
  if (shapes.size() >= kMaxShapes) shapes.clear();
  shapes.emplace(key, launchable);
  return launchable;
}

}  // namespace

void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
               const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, out, options);
  if (problem.empty()) return;  // nothing to compute, nothing launched
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_placement(q, k, v, out, options.lse, device);
  const detail::AttnTensors t{q, k, v, out, options.lse};
  const Launchable l = launchable_for(problem, t, options.stream, device);
  void* workspace = detail::stream_workspace(options.stream, l.plan.workspace_bytes);
  l.family->launch(l.plan, problem, t, workspace, options.stream);
}

void attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                      const VarlenBatch& batch, const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention_varlen(q, k, v, out, batch, options);
  if (problem.empty()) return;
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_placement(q, k, v, out, options.lse, device);
  const detail::AttnTensors t{q, k, v, out, options.lse, nullptr, 0, nullptr, batch.cu_seqlens_q,
                              batch.cu_seqlens_k};
  if (detail::knobs().check) detail::check_varlen_contents(problem, t, options.stream);
  const Launchable l = launchable_for(problem, t, options.stream, device);
  void* workspace = detail::stream_workspace(options.stream, l.plan.workspace_bytes);
  l.family->launch(l.plan, problem, t, workspace, options.stream);
}

DeviceTensor attention(const TensorView& q, const TensorView& k, const TensorView& v,
                       const AttentionOptions& options) {
  // Validate against a placeholder output first: bad arguments must fail
  // before anything is allocated (and without a GPU, as InvalidArgument).
  TensorView placeholder = TensorView::bhsd(nullptr, q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
  if (q.numel() > 0) placeholder.data = reinterpret_cast<void*>(std::uintptr_t(16));  // never dereferenced
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, placeholder, options);
  DeviceTensor out;
  out.buffer = DeviceBuffer(std::size_t(q.numel()) * element_size(q.dtype));
  out.view = TensorView::bhsd(out.buffer.data(), q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
  if (!problem.empty()) attention(q, k, v, out.view, options);
  return out;
}

AttentionPlan plan_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                             const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, out, options);
  if (problem.empty()) return {};
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_placement(q, k, v, out, options.lse, device);
  const Prepared p = prepare(problem, {q, k, v, out, options.lse}, options.stream, device.target);
  return {p.family->name(), p.family->variant_name(p.spec, p.config), p.config};
}

}  // namespace jit
