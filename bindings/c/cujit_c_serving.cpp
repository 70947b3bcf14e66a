// The serving half of the C interface (cujit_c.h): attention over a KV cache
// (jit/serving.h), one-call and planned, with the same status and message
// convention as the rest (c_api_support.h).
#include <array>
#include <cstddef>
#include <string>

#include "bindings/c/c_api_support.h"
#include "bindings/c/cujit_c.h"
#include "jit/serving.h"

// The layouts bindings/python/cujit/_structs.py mirrors with ctypes (natural
// alignment, LP64): a change here is an ABI change (CUJIT_C_ABI_VERSION).
static_assert(sizeof(cujit_tensor) == 80 && sizeof(cujit_kv_cache) == 232 &&
              offsetof(cujit_kv_cache, descale_per_page) == 228);
static_assert(sizeof(cujit_kv_shape) == 80 && offsetof(cujit_kv_shape, seq_q) == 40 &&
              offsetof(cujit_kv_shape, kv_dtype) == 68 && offsetof(cujit_kv_shape, head_major) == 72 &&
              offsetof(cujit_kv_shape, descale_per_page) == 76);
static_assert(sizeof(cujit_kv_options) == 12 && sizeof(cujit_kv_run_options) == 24);

// The opaque handle behind cujit_kv_plan*.
struct cujit_kv_plan {
  jit::KvAttentionPlan plan;
};

using cujit_c::guarded;
using cujit_c::null_argument;
using cujit_c::view_of;

namespace {

jit::KvCache cache_of(const cujit_kv_cache* c) {
  if (c == nullptr) null_argument("cache");
  jit::KvCache cache;
  cache.k = view_of(&c->k, "cache.k");
  cache.v = view_of(&c->v, "cache.v");
  cache.block_table = c->block_table;
  cache.pages_per_seq = c->pages_per_seq;
  cache.block_table_stride = c->block_table_stride;
  cache.seq_lens = c->seq_lens;
  cache.k_descale = c->k_descale;
  cache.v_descale = c->v_descale;
  if (c->has_descale_strides) cache.descale_strides = std::array<std::int64_t, 2>{c->descale_strides[0], c->descale_strides[1]};
  cache.descale_per_page = c->descale_per_page != 0;
  return cache;
}

jit::KvAttentionShape shape_of(const cujit_kv_shape* s) {
  if (s == nullptr) null_argument("shape");
  jit::KvAttentionShape shape;
  shape.batch = s->batch;
  shape.heads_q = s->heads_q;
  shape.heads_kv = s->heads_kv;
  shape.head_dim = s->head_dim;
  shape.dtype = cujit_c::dtype_of(s->dtype, "shape.dtype");
  shape.seq_q = s->seq_q;
  shape.max_seq_k = s->max_seq_k;
  shape.page_size = s->page_size;
  shape.per_sequence_lengths = s->per_sequence_lengths != 0;
  if (s->kv_dtype != 0 && s->kv_dtype != s->dtype) shape.kv_dtype = cujit_c::dtype_of(s->kv_dtype, "shape.kv_dtype");
  shape.token_major = s->head_major == 0;
  shape.descale_per_page = s->descale_per_page != 0;
  return shape;
}

jit::KvAttentionOptions options_of(const cujit_kv_options* o) {
  jit::KvAttentionOptions options;
  if (o == nullptr) return options;
  options.causal = o->causal != 0;
  if (o->scale != 0.f) options.scale = o->scale;
  options.num_splits = o->num_splits;
  return options;
}

jit::KvRunOptions run_of(const cujit_kv_run_options* r) {
  jit::KvRunOptions run;
  if (r == nullptr) return run;
  run.stream = static_cast<jit::Stream>(r->stream);
  run.lse = r->lse;
  run.workspace = r->workspace;
  return run;
}

const jit::KvAttentionPlan& plan_of(const cujit_kv_plan* plan) {
  if (plan == nullptr) null_argument("plan");
  return plan->plan;
}

}  // namespace

extern "C" {

cujit_status cujit_attention_with_kvcache(const cujit_tensor* q, const cujit_kv_cache* cache, const cujit_tensor* out,
                                          const cujit_kv_options* options, const cujit_kv_run_options* run) {
  return guarded([&] {
    jit::attention_with_kvcache(view_of(q, "q"), cache_of(cache), view_of(out, "out"), options_of(options),
                                run_of(run));
  });
}

cujit_status cujit_kv_plan_create(const cujit_kv_shape* shape, const cujit_kv_options* options, void* stream,
                                  cujit_kv_plan** plan) {
  if (plan != nullptr) *plan = nullptr;
  return guarded([&] {
    if (plan == nullptr) null_argument("plan");
    const jit::KvAttentionShape s = shape_of(shape);
    *plan = new cujit_kv_plan{jit::plan_kv_attention(s, options_of(options), static_cast<jit::Stream>(stream))};
  });
}

cujit_status cujit_kv_plan_run(const cujit_kv_plan* plan, const cujit_tensor* q, const cujit_kv_cache* cache,
                               const cujit_tensor* out, const cujit_kv_run_options* run) {
  return guarded([&] { plan_of(plan).run(view_of(q, "q"), cache_of(cache), view_of(out, "out"), run_of(run)); });
}

cujit_status cujit_kv_plan_workspace_bytes(const cujit_kv_plan* plan, size_t* bytes) {
  return guarded([&] {
    if (bytes == nullptr) null_argument("bytes");
    *bytes = plan_of(plan).workspace_bytes();
  });
}

cujit_status cujit_kv_plan_num_splits(const cujit_kv_plan* plan, int* splits) {
  return guarded([&] {
    if (splits == nullptr) null_argument("splits");
    *splits = plan_of(plan).num_splits();
  });
}

cujit_status cujit_kv_plan_describe(const cujit_kv_plan* plan, char* buffer, size_t size) {
  return guarded([&] {
    cujit_c::check_text_buffer(buffer, size, "cujit_kv_plan_describe");
    const jit::KvAttentionPlan& p = plan_of(plan);
    cujit_c::copy_text(p.family() + "/" + p.variant(), buffer, size);
  });
}

void cujit_kv_plan_destroy(cujit_kv_plan* plan) { delete plan; }

}  // extern "C"
