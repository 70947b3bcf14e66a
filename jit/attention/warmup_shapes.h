// The attention problems a warm-up compiles for: a warm-up shape as a
// problem, and every specialization the registered families serve on a target.
#pragma once
#include <vector>

#include "jit/attention/attention_problem.h"
#include "jit/warmup.h"

namespace jit::detail {

// Self-attention of the shape's sizes (Sq = Sk, Hq = Hkv), top-left causal;
// a ragged shape is `batch` sequences of `seq` rows packed.
AttnProblem problem_of(const AttentionShape& shape);

// One shape (1 x 16 x 1024) per (dtype, head dim, causal, dense or ragged)
// that a registered family serves on `target`: each head dim of any family's
// list, both dtypes.
std::vector<AttentionShape> attention_specializations(const Target& target);

}  // namespace jit::detail
