// A ragged batch's plan (jit/varlen.h): the tile list made once per step by
// prepare(), the attention kernel alone in each run().
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "jit/attention/call_path.h"
#include "jit/attention/tensor_placement.h"
#include "jit/attention/view_checks.h"
#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/varlen.h"

namespace jit {

struct VarlenAttentionPlan::Impl {
  detail::AttnProblem problem;
  VarlenBatch batch;         // the composition: its counts (prepare's pointers may differ)
  AttentionOptions options;  // causal, align and scale; a run brings the rest
  std::optional<detail::ChosenPlan> chosen;  // none for an empty batch: nothing is launched
  DeviceBuffer workspace;
  CUcontext context = nullptr;

  // The plan's call with these tensors and per-run options.
  AttentionOptions options_with(const VarlenRunOptions& run) const {
    AttentionOptions o = options;
    o.stream = run.stream;
    o.lse = run.lse;
    o.descale = run.descale;
    return o;
  }
};

namespace {

const VarlenAttentionPlan::Impl& impl_of(const std::unique_ptr<VarlenAttentionPlan::Impl>& impl) {
  if (!impl) {
    throw Error(ErrorCode::InvalidArgument, "this VarlenAttentionPlan is empty: make it with jit::plan_attention_varlen");
  }
  return *impl;
}

// The prepare step reads only the prefix sums: tensors with no data beside them.
detail::AttnTensors prefix_sums_only(const VarlenBatch& batch) {
  static const TensorView none{};
  detail::AttnTensors t{none, none, none, none, nullptr};
  t.cu_seqlens_q = batch.cu_seqlens_q;
  t.cu_seqlens_k = batch.cu_seqlens_k;
  return t;
}

void check_same_composition(const VarlenBatch& plan, const VarlenBatch& given) {
  if (given.batch != plan.batch || given.max_seqlen_q != plan.max_seqlen_q ||
      given.max_seqlen_k != plan.max_seqlen_k) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("prepare: the batch has {} sequences (longest {} query rows, {} keys) but the plan was made "
                            "for {} ({}, {}): make a plan for this composition",
                            given.batch, given.max_seqlen_q, given.max_seqlen_k, plan.batch, plan.max_seqlen_q,
                            plan.max_seqlen_k));
  }
  detail::check_prefix_sum_pointers(given);
}

// The tile list's memory for a prepare or a run: the caller's `given`
// (named `name` in errors), checked, or the plan's own.
void* list_memory(const VarlenAttentionPlan::Impl& impl, void* given, const char* name,
                  const detail::DeviceInfo& device) {
  if (given == nullptr) return impl.workspace.data();
  if (reinterpret_cast<std::uintptr_t>(given) % 16 != 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{} must be 16-byte aligned; its address is {} (nullptr uses the plan's own)", name,
                            given));
  }
  detail::check_pointer_placement(name, given, device);
  return given;
}

}  // namespace

VarlenAttentionPlan::VarlenAttentionPlan() = default;
VarlenAttentionPlan::~VarlenAttentionPlan() = default;
VarlenAttentionPlan::VarlenAttentionPlan(VarlenAttentionPlan&&) noexcept = default;
VarlenAttentionPlan& VarlenAttentionPlan::operator=(VarlenAttentionPlan&&) noexcept = default;

VarlenAttentionPlan plan_attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                                          const TensorView& out, const VarlenBatch& batch,
                                          const AttentionOptions& options) {
  auto impl = std::make_unique<VarlenAttentionPlan::Impl>();
  impl->problem = detail::validate_attention_varlen(q, k, v, out, batch, options);
  impl->batch = batch;
  impl->options.causal = options.causal;
  impl->options.align = options.align;
  impl->options.scale = options.scale;
  VarlenAttentionPlan plan;
  if (!impl->problem.empty()) {
    const detail::DeviceInfo& device = detail::current_device();
    impl->context = device.context;
    const detail::AttnTensors t =
        detail::checked_varlen_tensors(impl->problem, q, k, v, out, batch, options, device);
    impl->chosen = detail::chosen_plan(impl->problem, t, options.stream, device);
    impl->workspace = DeviceBuffer(impl->chosen->plan.workspace_bytes);
  }
  plan.impl_ = std::move(impl);
  return plan;
}

void VarlenAttentionPlan::prepare(const VarlenBatch& batch, Stream stream, void* workspace) const {
  const Impl& impl = impl_of(impl_);
  if (impl.problem.empty()) return;
  check_same_composition(impl.batch, batch);
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_plan_context(impl.context, device);
  detail::check_varlen_placement(batch, device);
  void* list = list_memory(impl, workspace, "workspace", device);
  const detail::AttnTensors t = prefix_sums_only(batch);
  if (detail::knobs().check) detail::check_varlen_contents(impl.problem, t, stream);
  detail::launch_varlen_prepare(impl.chosen->plan.steps[0], impl.problem, t, list, stream);
}

void VarlenAttentionPlan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                              const VarlenRunOptions& run) const {
  const Impl& impl = impl_of(impl_);
  const AttentionOptions options = impl.options_with(run);
  const detail::AttnProblem problem = detail::validate_attention_varlen(q, k, v, out, impl.batch, options);
  if (!(problem == impl.problem)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("run: q {}, k {}, v {}, out {} do not have the shapes and element types the plan was made "
                            "for: make a plan for them",
                            detail::shape_text(q), detail::shape_text(k), detail::shape_text(v),
                            detail::shape_text(out)));
  }
  if (problem.empty()) return;
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_plan_context(impl.context, device);
  detail::check_on_device(problem, q, k, v, out, options, device);
  void* list = list_memory(impl, run.workspace, "run.workspace", device);
  // The tile list is in the workspace already: the prefix sums are not read.
  detail::AttnTensors t = detail::tensors_of(problem, q, k, v, out, options);
  t.varlen_tiles_ready = true;
  impl.chosen->family->launch(impl.chosen->plan, problem, t, list, run.stream);
}

std::size_t VarlenAttentionPlan::workspace_bytes() const { return impl_of(impl_).workspace.size(); }

std::string VarlenAttentionPlan::family() const {
  const Impl& impl = impl_of(impl_);
  return impl.chosen ? impl.chosen->family->name() : std::string();
}

std::string VarlenAttentionPlan::variant() const {
  const Impl& impl = impl_of(impl_);
  if (!impl.chosen) return {};
  const detail::AttentionFamily& family = *impl.chosen->family;
  return family.variant_name(family.spec_for(impl.problem), impl.chosen->config);
}

Json VarlenAttentionPlan::config() const {
  const Impl& impl = impl_of(impl_);
  return impl.chosen ? impl.chosen->config : Json::object();
}

}  // namespace jit
