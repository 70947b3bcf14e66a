// The ragged-batch calls of the C interface (cujit_c.h): jit::attention_varlen
// and jit::VarlenAttentionPlan (jit/varlen.h), with the same status and
// message convention as the rest (c_api_support.h).
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "bindings/c/c_api_support.h"
#include "bindings/c/cujit_c.h"
#include "jit/error.h"
#include "jit/varlen.h"

// The layout bindings/python/cujit/_structs.py mirrors with ctypes (natural
// alignment, LP64): a change here is an ABI change (CUJIT_C_ABI_VERSION).
static_assert(sizeof(cujit_varlen_batch) == 40 && offsetof(cujit_varlen_batch, batch) == 16);

// The opaque handle behind cujit_varlen_plan*: the plan, and the options it
// was made with (a run's must agree).
struct cujit_varlen_plan {
  jit::VarlenAttentionPlan plan;
  jit::AttentionOptions options;
};

namespace {

jit::VarlenBatch batch_of(const cujit_varlen_batch* b) {
  if (b == nullptr) cujit_c::null_argument("batch");
  jit::VarlenBatch batch;
  batch.cu_seqlens_q = b->cu_seqlens_q;
  batch.cu_seqlens_k = b->cu_seqlens_k;
  batch.batch = b->batch;
  batch.max_seqlen_q = b->max_seqlen_q;
  batch.max_seqlen_k = b->max_seqlen_k;
  return batch;
}

const cujit_varlen_plan& plan_of(const cujit_varlen_plan* plan) {
  if (plan == nullptr) cujit_c::null_argument("plan");
  return *plan;
}

// A run's options: the stream, LSE and descale factors of `o`, whose mask
// and scale must be the plan's (the C struct carries them on every call).
jit::VarlenRunOptions run_of(const cujit_varlen_plan& plan, const cujit_options* o, void* workspace) {
  const jit::AttentionOptions given = cujit_c::attention_options_of(o);
  const jit::AttentionOptions& made = plan.options;
  const bool same_mask = given.causal == made.causal && (!made.causal || given.align == made.align);
  if (!same_mask || given.scale != made.scale) {
    throw jit::Error(jit::ErrorCode::InvalidArgument,
                     fmt::format("options->causal, bottom_right and scale ({}, {}, {}) are not the plan's ({}, {}, {}): "
                                 "make a plan for them",
                                 int(given.causal), int(given.align == jit::CausalAlign::BottomRight),
                                 given.scale.value_or(0.f), int(made.causal),
                                 int(made.align == jit::CausalAlign::BottomRight), made.scale.value_or(0.f)));
  }
  return {given.stream, given.lse, given.descale, workspace};
}

}  // namespace

extern "C" {

cujit_status cujit_attention_varlen(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                    const cujit_tensor* out, const cujit_varlen_batch* batch,
                                    const cujit_options* options) {
  using cujit_c::view_of;
  return cujit_c::guarded([&] {
    jit::attention_varlen(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"), batch_of(batch),
                          cujit_c::attention_options_of(options));
  });
}

cujit_status cujit_varlen_plan_create(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                      const cujit_tensor* out, const cujit_varlen_batch* batch,
                                      const cujit_options* options, cujit_varlen_plan** plan) {
  using cujit_c::view_of;
  if (plan != nullptr) *plan = nullptr;
  return cujit_c::guarded([&] {
    if (plan == nullptr) cujit_c::null_argument("plan");
    const jit::AttentionOptions o = cujit_c::attention_options_of(options);
    *plan = new cujit_varlen_plan{
        jit::plan_attention_varlen(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"),
                                   batch_of(batch), o),
        o};
  });
}

cujit_status cujit_varlen_plan_prepare(const cujit_varlen_plan* plan, const cujit_varlen_batch* batch, void* stream) {
  return cujit_varlen_plan_prepare_in(plan, batch, stream, nullptr);
}

cujit_status cujit_varlen_plan_prepare_in(const cujit_varlen_plan* plan, const cujit_varlen_batch* batch,
                                          void* stream, void* workspace) {
  return cujit_c::guarded(
      [&] { plan_of(plan).plan.prepare(batch_of(batch), static_cast<jit::Stream>(stream), workspace); });
}

cujit_status cujit_varlen_plan_run(const cujit_varlen_plan* plan, const cujit_tensor* q, const cujit_tensor* k,
                                   const cujit_tensor* v, const cujit_tensor* out, const cujit_options* options) {
  return cujit_varlen_plan_run_in(plan, q, k, v, out, options, nullptr);
}

cujit_status cujit_varlen_plan_run_in(const cujit_varlen_plan* plan, const cujit_tensor* q, const cujit_tensor* k,
                                      const cujit_tensor* v, const cujit_tensor* out, const cujit_options* options,
                                      void* workspace) {
  using cujit_c::view_of;
  return cujit_c::guarded([&] {
    const cujit_varlen_plan& p = plan_of(plan);
    p.plan.run(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"), run_of(p, options, workspace));
  });
}

cujit_status cujit_varlen_plan_workspace_bytes(const cujit_varlen_plan* plan, size_t* bytes) {
  return cujit_c::guarded([&] {
    if (bytes == nullptr) cujit_c::null_argument("bytes");
    *bytes = plan_of(plan).plan.workspace_bytes();
  });
}

cujit_status cujit_varlen_plan_describe(const cujit_varlen_plan* plan, char* buffer, size_t size) {
  return cujit_c::guarded([&] {
    cujit_c::check_text_buffer(buffer, size, "cujit_varlen_plan_describe");
    const jit::VarlenAttentionPlan& p = plan_of(plan).plan;
    const std::string family = p.family();
    cujit_c::copy_text(family.empty() ? family : family + "/" + p.variant(), buffer, size);
  });
}

void cujit_varlen_plan_destroy(cujit_varlen_plan* plan) { delete plan; }

}  // extern "C"
