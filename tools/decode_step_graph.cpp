// The decode step in a CUDA graph (decode_step_graph.h).
#include "tools/decode_step_graph.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "jit/serving.h"
#include "jit/timing.h"
#include "tools/cuda_runtime_check.h"
#include "tools/kv_cache_buffers.h"

namespace serving_bench {
namespace {

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw jit::Error(jit::ErrorCode::Driver, fmt::format("{} failed: {}", call, cublasGetStatusString(status)));
}
#define SERVING_CUBLAS_CHECK(call) check_cublas((call), #call)

struct CublasDeleter {
  void operator()(cublasContext* handle) const { cublasDestroy(handle); }
};
struct GraphDeleter {
  void operator()(CUgraph_st* graph) const { cudaGraphDestroy(graph); }
};
struct GraphExecDeleter {
  void operator()(CUgraphExec_st* exec) const { cudaGraphExecDestroy(exec); }
};

// cuBLAS's own workspace, given up front so that nothing allocates inside the capture.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;

}  // namespace

GraphStepTiming time_decode_step_graph(const DecodeShape& s, cudaStream_t stream, bool quick) {
  const int hidden = int(s.heads_q * s.head_dim);
  const int batch = int(s.batch);
  const cudaDataType type = s.dtype == jit::DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const std::size_t weight_bytes = std::size_t(hidden) * hidden * jit::element_size(s.dtype);

  DecodeInputs inputs = decode_inputs(s);
  const ContiguousCache cache = contiguous_cache(s, inputs);
  jit::DeviceBuffer w_in(weight_bytes), w_out(weight_bytes), x(inputs.q_buffer.size());
  fill_random(w_in, s.dtype, 7);
  fill_random(w_out, s.dtype, 8);
  fill_random(x, s.dtype, 9);
  jit::DeviceBuffer cublas_workspace(kCublasWorkspaceBytes);

  cublasHandle_t raw = nullptr;
  SERVING_CUBLAS_CHECK(cublasCreate(&raw));
  const std::unique_ptr<cublasContext, CublasDeleter> handle(raw);
  SERVING_CUBLAS_CHECK(cublasSetStream(raw, stream));
  SERVING_CUBLAS_CHECK(cublasSetWorkspace(raw, cublas_workspace.data(), cublas_workspace.size()));

  const jit::KvAttentionPlan plan = jit::plan_kv_attention(kv_attention_shape(s, 0), {}, stream);
  jit::KvRunOptions run;
  run.stream = stream;

  // Row-major [B, hidden] x [hidden, hidden] is column-major W^T-shaped
  // (hidden x hidden) times X (hidden x B). The scale keeps values near 1
  // from step to step.
  const float alpha = 1.0f / std::sqrt(float(hidden)), beta = 0.0f;
  auto gemm = [&](const void* in, const void* weight, void* out) {
    SERVING_CUBLAS_CHECK(cublasGemmEx(raw, CUBLAS_OP_N, CUBLAS_OP_N, hidden, batch, hidden, &alpha, weight, type,
                                      hidden, in, type, hidden, &beta, out, type, hidden, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  };
  auto step = [&] {
    gemm(x.data(), w_in.data(), inputs.q_buffer.data());
    plan.run(inputs.q, cache.cache, inputs.out, run);
    gemm(inputs.out_buffer.data(), w_out.data(), x.data());
  };
  // Outside the capture: cuBLAS picks and loads its kernels.
  for (int i = 0; i < 3; ++i) step();
  SERVING_CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t raw_graph = nullptr;
  SERVING_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  try {
    for (int i = 0; i < kGraphSteps; ++i) step();
  } catch (...) {
    cudaStreamEndCapture(stream, &raw_graph);  // leaves the stream usable; the capture is void
    if (raw_graph) cudaGraphDestroy(raw_graph);
    throw;
  }
  SERVING_CUDA_CHECK(cudaStreamEndCapture(stream, &raw_graph));
  const std::unique_ptr<CUgraph_st, GraphDeleter> graph(raw_graph);
  cudaGraphExec_t raw_exec = nullptr;
  SERVING_CUDA_CHECK(cudaGraphInstantiate(&raw_exec, raw_graph, 0));
  const std::unique_ptr<CUgraphExec_st, GraphExecDeleter> exec(raw_exec);

  jit::TimingOptions timing;
  timing.warmup = 10;
  timing.min_reps = 20;
  timing.max_reps = quick ? 100 : 500;
  timing.target_ms = quick ? 20 : 100;
  timing.flush_l2 = false;  // L2 warm: a model step's weights and cache as the last replay left them
  const jit::Timing t =
      jit::time_on_stream([&] { SERVING_CUDA_CHECK(cudaGraphLaunch(raw_exec, stream)); }, stream, timing);
  return {t.median_us / kGraphSteps, plan.variant()};
}

}  // namespace serving_bench
