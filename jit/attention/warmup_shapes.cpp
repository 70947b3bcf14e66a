#include "jit/attention/warmup_shapes.h"

#include <set>

#include "jit/attention/family_registry.h"
#include "jit/attention/kv_validation.h"
#include "jit/error.h"

namespace jit::detail {

KvAttentionShape kv_plan_shape_of(const AttentionShape& s) {
  KvAttentionShape kv;
  kv.batch = s.batch;
  kv.heads_q = s.heads;
  kv.heads_kv = s.heads_kv != 0 ? s.heads_kv : s.heads;
  kv.head_dim = s.head_dim;
  kv.dtype = s.dtype;
  kv.seq_q = s.new_rows;
  kv.max_seq_k = s.seq;
  kv.page_size = s.page_size;
  kv.per_sequence_lengths = true;
  if (s.fp8_kv) kv.kv_dtype = s.fp8_format;
  kv.token_major = !s.kv_head_major;
  kv.descale_per_page = s.kv_descale_per_page;
  return kv;
}

KvAttentionOptions kv_plan_options_of(const AttentionShape& s) {
  KvAttentionOptions options;
  options.causal = s.causal;
  return options;
}

AttnProblem problem_of(const AttentionShape& s) {
  if (s.kv_cache) {
    if (s.varlen) {
      throw Error(ErrorCode::InvalidArgument, "a KV-cache shape is not a ragged batch: set kv_cache or varlen");
    }
    return kv_problem_of(kv_plan_shape_of(s), kv_plan_options_of(s));
  }
  AttnProblem p;
  p.batch = s.batch;
  p.heads_q = p.heads_kv = s.heads;
  p.seq_q = p.seq_k = s.seq;
  p.head_dim = s.head_dim;
  p.dtype = s.dtype;
  p.causal = s.causal;
  p.fp8_qkv = s.fp8_qkv;
  if (s.varlen) {
    p.varlen = true;
    p.total_q = p.total_k = s.batch * s.seq;
  }
  return p;
}

std::vector<AttentionShape> attention_specializations(const Target& target) {
  std::set<int> head_dims;  // ascending, as the warm-up lists them
  for (const FamilyRegistration& r : attention_families()) {
    for (int i = 0; i < r.head_dims.count; ++i) head_dims.insert(r.head_dims.values[i]);
  }
  std::vector<AttentionShape> shapes;
  for (bool fp8_qkv : {false, true})
    for (DType dtype : {DType::f16, DType::bf16})
      for (int d : head_dims)
        for (bool causal : {false, true})
          for (bool varlen : {false, true}) {
            AttentionShape shape{1, 16, 1024, d, dtype, causal, varlen};
            shape.fp8_qkv = fp8_qkv;
            try {
              attention_family_for(problem_of(shape), target);
              shapes.push_back(shape);
            } catch (const Error& e) {
              if (e.code() != ErrorCode::Unsupported) throw;  // no family serves it on this target
            }
          }
  return shapes;
}

}  // namespace jit::detail
