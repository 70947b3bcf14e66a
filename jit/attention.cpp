// jit::attention: validate -> device -> family -> tune key -> config ->
// kernel -> launch (ARCHITECTURE.md, "One call, end to end").
#include "jit/attention.h"

#include <mutex>
#include <unordered_map>

#include "jit/attention_family.h"
#include "jit/attention_problem.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/tensor_placement.h"

namespace jit {
namespace {

struct Prepared {
  detail::AttnProblem problem;
  const detail::AttentionFamily* family = nullptr;
  Json spec;
  Json config;
};

// Steps 3-5 for a validated, non-empty problem.
Prepared prepare(const detail::AttnProblem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                 Stream stream) {
  Prepared p;
  p.problem = problem;
  const detail::DeviceInfo& device = detail::current_device();
  p.family = &detail::attention_family_for(problem, device.target);
  p.spec = detail::AttentionFamily::spec_of(problem);
  const detail::AttentionFamily& family = *p.family;
  // Candidates are timed on the caller's inputs but write to a scratch
  // output, never to `out` or the caller's LSE.
  std::optional<DeviceBuffer> scratch_out;
  TensorView scratch_view;
  auto run = [&](const Kernel& kernel, const Json& config, Stream s) {
    if (!scratch_out) {
      scratch_out.emplace(std::size_t(q.numel()) * element_size(q.dtype));
      scratch_view = TensorView::bhsd(scratch_out->data(), q.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    }
    family.launch(kernel, family.plan(problem, config), problem, {q, k, v, scratch_view, nullptr}, s);
  };
  p.config = choose_config(family, p.spec, detail::attention_bucket(problem), run, stream);
  return p;
}

// The hot path: the kernel and launch geometry of an exact problem shape seen
// before on this context, so a repeated call skips tune-key hashing and JSON.
struct ShapeKey {
  CUcontext context;
  detail::AttnProblem problem;
  bool operator==(const ShapeKey& o) const {
    const auto& a = problem;
    const auto& b = o.problem;
    return context == o.context && a.batch == b.batch && a.heads_q == b.heads_q && a.heads_kv == b.heads_kv &&
           a.seq_q == b.seq_q && a.seq_k == b.seq_k && a.head_dim == b.head_dim && a.dtype == b.dtype &&
           a.causal == b.causal;
  }
};
struct ShapeKeyHash {
  std::size_t operator()(const ShapeKey& k) const {
    const auto& p = k.problem;
    std::size_t h = std::hash<const void*>()(k.context);
    for (std::int64_t v : {p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim, std::int64_t(p.dtype),
                           std::int64_t(p.causal)}) {
      h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    }
    return h;
  }
};
struct Launchable {
  const detail::AttentionFamily* family;
  const Kernel* kernel;
  detail::AttnLaunch launch;
};

Launchable launchable_for(const detail::AttnProblem& problem, const TensorView& q, const TensorView& k,
                          const TensorView& v, Stream stream, const detail::DeviceInfo& device) {
  constexpr std::size_t kMaxShapes = 4096;  // varying lengths must not grow it without bound
  static std::mutex mutex;
  static std::unordered_map<ShapeKey, Launchable, ShapeKeyHash> shapes;
  const ShapeKey key{device.context, problem};
  {
    std::lock_guard lock(mutex);
    if (auto it = shapes.find(key); it != shapes.end()) return it->second;
  }
  const Prepared p = prepare(problem, q, k, v, stream);
  const Launchable launchable{p.family, &get_kernel(*p.family, p.spec, p.config), p.family->plan(problem, p.config)};
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
  const Launchable l = launchable_for(problem, q, k, v, options.stream, device);
  l.family->launch(*l.kernel, l.launch, problem, {q, k, v, out, options.lse}, options.stream);
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
  detail::check_placement(q, k, v, out, options.lse, detail::current_device());
  const Prepared p = prepare(problem, q, k, v, options.stream);
  return {p.family->name(), p.family->variant_name(p.spec, p.config), p.config};
}

}  // namespace jit
