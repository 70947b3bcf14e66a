// CUJIT_CHECK=1: before a KV-cache run, a kernel reads the cache's
// device-side contents that the host cannot check cheaply (each sequence's
// length against max_seq_k, each page id it uses against the pool) and the
// first bad entry becomes an Error(InvalidArgument) naming it. It waits for
// the stream, so it is for debugging; under graph capture it is skipped.
#pragma once
#include "jit/attention/attention_problem.h"
#include "jit/serving.h"

namespace jit::detail {

// `problem` and the cache have passed check_kv_run.
void check_kv_contents(const AttnProblem& problem, const KvCache& cache, Stream stream);

}  // namespace jit::detail
