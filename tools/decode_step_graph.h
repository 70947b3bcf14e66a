// A decode step as a model runs it, captured once in a CUDA graph and
// replayed: a projection GEMM (cuBLAS) makes q, attention over the KV cache
// (KvAttentionPlan::run), an output GEMM feeds the next step. Built only
// where cuBLAS was found (CUJIT_SERVING_BENCH_CUBLAS).
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "tools/serving_shapes.h"

namespace serving_bench {

/// Steps captured back to back in one graph, each reading the last one's output.
constexpr int kGraphSteps = 8;

struct GraphStepTiming {
  double step_us = 0;   ///< median graph replay time / kGraphSteps, L2 warm
  std::string variant;  ///< the attention plan's
};

/// GEMMs [B, Hq*D] x [Hq*D, Hq*D] in the shape's dtype, around one decode
/// over a contiguous cache of the shape; timed on `stream` (not the default
/// stream: it is captured). jit::Stream and cudaStream_t are one type.
GraphStepTiming time_decode_step_graph(const DecodeShape& shape, cudaStream_t stream, bool quick);

}  // namespace serving_bench
