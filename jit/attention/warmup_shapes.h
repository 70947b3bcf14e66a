// The attention problems a warm-up compiles for: a warm-up shape as a
// problem, and every specialization the registered families serve on a target.
#pragma once
#include <vector>

#include "jit/attention/attention_problem.h"
#include "jit/serving.h"
#include "jit/warmup.h"

namespace jit::detail {

// Self-attention of the shape's sizes (Sq = Sk, Hq = Hkv), top-left causal;
// a ragged shape is `batch` sequences of `seq` rows packed. A KV-cache shape
// is the problem plan_kv_attention makes for kv_plan_shape_of and
// kv_plan_options_of, its errors included (Error(InvalidArgument) naming the
// field), as is one that is also ragged.
AttnProblem problem_of(const AttentionShape& shape);

// A KV-cache shape as plan_kv_attention takes it: new_rows query rows per
// sequence against at most `seq` keys, with a length per sequence (as
// attention_with_kvcache has when the cache gives seq_lens).
KvAttentionShape kv_plan_shape_of(const AttentionShape& shape);
KvAttentionOptions kv_plan_options_of(const AttentionShape& shape);

// One shape (1 x 16 x 1024) per (q/k/v dtype, output dtype, head dim,
// causal, dense or ragged) that a registered family serves on `target`: each
// head dim of any family's list, both output dtypes, q, k and v in them or
// in e4m3 where FP8 attention is served.
std::vector<AttentionShape> attention_specializations(const Target& target);

}  // namespace jit::detail
