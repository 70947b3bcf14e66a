// Step 1 of the call path: checked attention arguments as plain data, and the
// kernel parameter struct built from them. No GPU needed.
#pragma once
#include <cstdint>

#include "jit/attention.h"
#include "kernel_src/attention/attn_params.h"

namespace jit::detail {

struct AttnProblem {
  std::int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  DType dtype = DType::f16;
  bool causal = false;
  int causal_offset = 0;  // key j visible to query i iff j <= i + causal_offset
  float scale = 0;
  bool empty() const { return batch == 0 || heads_q == 0 || seq_q == 0; }
};

// Throws Error(InvalidArgument) naming the argument and what to change, or
// Error(Unsupported) for a valid problem no family handles.
AttnProblem validate_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options);

cujit::AttnParams make_attn_params(const AttnProblem& problem, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out, float* lse);

// Problem-size fields of the tune key: sizes rounded up to powers of two
// (at least 64), so that one tuning serves a class of shapes.
Json attention_bucket(const AttnProblem& problem);

}  // namespace jit::detail
