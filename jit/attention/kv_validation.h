// The serving API's checks (jit/serving.h): a plan's shape becomes an
// AttnProblem, and each run's tensors are checked against it. Every mistake
// is an Error(InvalidArgument) naming the argument. No GPU needed.
#pragma once
#include <cstddef>

#include "jit/attention/attention_problem.h"
#include "jit/serving.h"

namespace jit::detail {

// The problem a plan is made for.
AttnProblem kv_problem_of(const KvAttentionShape& shape, const KvAttentionOptions& options);

// One run's arguments against the plan's problem.
void check_kv_run(const AttnProblem& problem, const TensorView& q, const KvCache& cache, const TensorView& out,
                  const KvRunOptions& run, std::size_t workspace_bytes);

// What attention_with_kvcache reads from its arguments.
KvAttentionShape kv_shape_of(const TensorView& q, const KvCache& cache);

}  // namespace jit::detail
