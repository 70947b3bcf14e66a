// jit::attention and jit::attention_varlen: validate -> device -> family ->
// tune key -> config -> plan -> launch (docs/architecture.md, "The call path").
#include "jit/attention.h"

#include <optional>

#include "autotune/served_table.h"
#include "jit/attention/attention_problem.h"
#include "jit/attention/background_attention_tuning.h"
#include "jit/attention/call_path.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/fp8_checks.h"
#include "jit/attention/shape_key.h"
#include "jit/attention/stream_workspace.h"
#include "jit/attention/tensor_placement.h"
#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/background_tuning.h"
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
      scratch_out.emplace(std::size_t(q.numel()) * element_size(problem.dtype));
      scratch_view =
          TensorView::bhsd(scratch_out->data(), problem.dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    }
    detail::AttnPlan plan = family.plan(problem, config, target);
    family.bind_kernels(plan, p.spec, kernel);
    if (!scratch_workspace || scratch_workspace->size() < plan.workspace_bytes) {
      scratch_workspace.emplace(plan.workspace_bytes);
    }
    family.launch(plan, problem, t.with_output(scratch_view, nullptr), scratch_workspace->data(), s);
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
using ShapeTable = autotune::ServedTable<detail::ShapeKey, Launchable, detail::ShapeKeyHash>;

ShapeTable& shape_table() {
  static auto* table = new ShapeTable(4096);  // never destroyed: read until the process ends
  return *table;
}

// Background tuning only serves plain calls: a ragged batch's candidates
// would need the caller's cu_seqlens after the call returns.
bool tunes_in_background(const detail::AttnProblem& problem) {
  return detail::background_tuning_enabled() && !problem.varlen;
}

ShapeTable::Entry first_call(const detail::AttnProblem& problem, const detail::AttnTensors& t, Stream stream,
                             const detail::DeviceInfo& device) {
  // A config chosen during graph capture was not tuned: do not pin it.
  const bool keep = !detail::stream_is_capturing(stream);
  if (!tunes_in_background(problem)) {
    const detail::ChosenPlan chosen = detail::chosen_plan(problem, t, stream, device);
    return {{chosen.family, chosen.plan}, nullptr, keep};
  }
  const detail::AttentionFamily& family = detail::attention_family_for(problem, device.target);
  const Json spec = family.spec_for(problem);
  const Json bucket = family.bucket(problem);
  if (std::optional<Json> known = detail::known_config(family, spec, bucket, stream)) {
    return {{&family, detail::load_plan(family, problem, *known, device.target)}, nullptr, keep};
  }
  // Serve this call on a default config (one compile, of the family quickest
  // to compile), then tune behind it; the winner replaces it when ready.
  const detail::AttentionFamily& stopgap = detail::first_call_family_for(problem, device.target);
  const Json fallback = stopgap.default_config(stopgap.spec_for(problem), device.target);
  ShapeTable::Entry entry{{&stopgap, detail::load_plan(stopgap, problem, fallback, device.target)}, nullptr, keep};
  if (keep) entry.pending = start_background_tuning(family, spec, bucket, problem, device);
  return entry;
}

// A problem's family and loaded plan (steps 3-5): from the table of exact
// problems seen on this context, else chosen (tuning on the first call of a
// shape class, on `stream`, with `t`'s inputs) and kept.
Launchable launchable_for(const detail::AttnProblem& problem, const detail::AttnTensors& t, Stream stream,
                          const detail::DeviceInfo& device) {
  const detail::ShapeKey key{device.context, problem};
  return shape_table().get(
      key, [&] { return first_call(problem, t, stream, device); },
      [&](const Json& winner) {
        const detail::AttentionFamily& family = detail::attention_family_for(problem, device.target);
        return Launchable{&family, detail::load_plan(family, problem, winner, device.target)};
      },
      // Loading the winner could make driver calls a capture forbids: swap after it.
      [&] { return !detail::stream_is_capturing(stream); });
}

}  // namespace

namespace detail {

ChosenPlan chosen_plan(const AttnProblem& problem, const AttnTensors& t, Stream stream, const DeviceInfo& device) {
  const Prepared p = prepare(problem, t, stream, device.target);
  return {p.family, p.config, load_plan(*p.family, problem, p.config, device.target)};
}

AttnTensors tensors_of(const AttnProblem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& out, const AttentionOptions& options) {
  AttnTensors t{q, k, v, out, options.lse};
  if (problem.fp8_qkv) {
    t.q_descale = options.descale.q;
    t.k_descale = options.descale.k;
    t.v_descale = options.descale.v;
    t.descale_strides = descale_strides_or_default(problem, options.descale.strides);
  }
  return t;
}

void check_on_device(const AttnProblem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TensorView& out, const AttentionOptions& options, const DeviceInfo& device) {
  check_placement(q, k, v, out, options.lse, device);
  if (!problem.fp8_qkv) return;
  check_pointer_placement("options.descale.q", options.descale.q, device);
  check_pointer_placement("options.descale.k", options.descale.k, device);
  check_pointer_placement("options.descale.v", options.descale.v, device);
  check_fp8_target(problem, device.target);
}

AttnTensors checked_varlen_tensors(const AttnProblem& problem, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out, const VarlenBatch& batch,
                                   const AttentionOptions& options, const DeviceInfo& device) {
  check_on_device(problem, q, k, v, out, options, device);
  check_varlen_placement(batch, device);
  AttnTensors t = tensors_of(problem, q, k, v, out, options);
  t.cu_seqlens_q = batch.cu_seqlens_q;
  t.cu_seqlens_k = batch.cu_seqlens_k;
  if (knobs().check) check_varlen_contents(problem, t, options.stream);
  return t;
}

}  // namespace detail

using detail::check_on_device;
using detail::tensors_of;

void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
               const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, out, options);
  if (problem.empty()) return;  // nothing to compute, nothing launched
  const detail::DeviceInfo& device = detail::current_device();
  check_on_device(problem, q, k, v, out, options, device);
  const detail::AttnTensors t = tensors_of(problem, q, k, v, out, options);
  const Launchable l = launchable_for(problem, t, options.stream, device);
  void* workspace = detail::stream_workspace(options.stream, l.plan.workspace_bytes);
  l.family->launch(l.plan, problem, t, workspace, options.stream);
}

void attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                      const VarlenBatch& batch, const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention_varlen(q, k, v, out, batch, options);
  if (problem.empty()) return;
  const detail::DeviceInfo& device = detail::current_device();
  const detail::AttnTensors t = detail::checked_varlen_tensors(problem, q, k, v, out, batch, options, device);
  const Launchable l = launchable_for(problem, t, options.stream, device);
  void* workspace = detail::stream_workspace(options.stream, l.plan.workspace_bytes);
  l.family->launch(l.plan, problem, t, workspace, options.stream);
}

DeviceTensor attention(const TensorView& q, const TensorView& k, const TensorView& v,
                       const AttentionOptions& options) {
  // Validate against a placeholder output first: bad arguments must fail
  // before anything is allocated (and without a GPU, as InvalidArgument).
  const DType out_dtype = q.dtype == DType::e4m3 ? DType::bf16 : q.dtype;
  TensorView placeholder = TensorView::bhsd(nullptr, out_dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
  if (q.numel() > 0) placeholder.data = reinterpret_cast<void*>(std::uintptr_t(16));  // never dereferenced
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, placeholder, options);
  DeviceTensor out;
  out.buffer = DeviceBuffer(std::size_t(q.numel()) * element_size(out_dtype));
  out.view = TensorView::bhsd(out.buffer.data(), out_dtype, q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
  if (!problem.empty()) attention(q, k, v, out.view, options);
  return out;
}

AttentionPlan plan_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                             const AttentionOptions& options) {
  const detail::AttnProblem problem = detail::validate_attention(q, k, v, out, options);
  if (problem.empty()) return {};
  const detail::DeviceInfo& device = detail::current_device();
  check_on_device(problem, q, k, v, out, options, device);
  const detail::AttnTensors t = tensors_of(problem, q, k, v, out, options);
  if (tunes_in_background(problem)) {
    // What the next call runs: the winner once its tuning is done, else the default.
    const Launchable l = launchable_for(problem, t, options.stream, device);
    const Json spec = l.family->spec_for(problem);
    const Json config = detail::known_config(*l.family, spec, l.family->bucket(problem), options.stream)
                            .value_or(l.family->default_config(spec, device.target));
    return {l.family->name(), l.family->variant_name(spec, config), config};
  }
  const Prepared p = prepare(problem, t, options.stream, device.target);
  return {p.family->name(), p.family->variant_name(p.spec, p.config), p.config};
}

}  // namespace jit
