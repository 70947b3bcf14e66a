// Checks a CUDA runtime call made by a tool (copies, streams, graphs): a
// failure is a jit::Error(Driver) naming the call and the error, as cujit's
// own Driver API errors are.
#pragma once
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "jit/error.h"

namespace serving_bench {

[[noreturn]] inline void throw_cuda_error(cudaError_t result, const char* call) {
  throw jit::Error(jit::ErrorCode::Driver,
                   fmt::format("{} failed: {} ({})", call, cudaGetErrorName(result), cudaGetErrorString(result)));
}

}  // namespace serving_bench

#define SERVING_CUDA_CHECK(call)                                                                   \
  do {                                                                                             \
    const cudaError_t serving_result_ = (call);                                                    \
    if (serving_result_ != cudaSuccess) ::serving_bench::throw_cuda_error(serving_result_, #call); \
  } while (0)
