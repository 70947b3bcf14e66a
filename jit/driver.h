// The CUDA Driver API, opened at run time with dlopen so that the library and
// its tools start (and compile) on machines with no driver. cuda.h supplies
// types only; every call goes through the table below.
#pragma once
#include <cuda.h>

#include <string>

#include "jit/error.h"

namespace jit::detail {

#define CUJIT_DRIVER_FUNCTIONS(X) \
  X(cuInit)                       \
  X(cuDriverGetVersion)           \
  X(cuGetErrorName)               \
  X(cuGetErrorString)             \
  X(cuDeviceGetCount)             \
  X(cuDeviceGet)                  \
  X(cuDeviceGetName)              \
  X(cuDeviceGetAttribute)         \
  X(cuDevicePrimaryCtxRetain)     \
  X(cuDevicePrimaryCtxRelease)    \
  X(cuCtxGetCurrent)              \
  X(cuCtxSetCurrent)              \
  X(cuCtxGetDevice)               \
  X(cuCtxSynchronize)             \
  X(cuModuleLoadData)             \
  X(cuModuleUnload)               \
  X(cuModuleGetFunction)          \
  X(cuFuncGetAttribute)           \
  X(cuFuncSetAttribute)           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuLaunchKernelEx)             \
  X(cuMemAlloc)                   \
  X(cuMemFree)                    \
  X(cuMemGetInfo)                 \
  X(cuMemcpyHtoD)                 \
  X(cuMemcpyDtoH)                 \
  X(cuMemsetD8)                   \
  X(cuMemsetD8Async)              \
  X(cuPointerGetAttributes)       \
  X(cuStreamCreate)               \
  X(cuStreamDestroy)              \
  X(cuStreamSynchronize)          \
  X(cuStreamIsCapturing)          \
  X(cuThreadExchangeStreamCaptureMode) \
  X(cuStreamGetId)                \
  X(cuStreamBeginCapture)         \
  X(cuStreamEndCapture)           \
  X(cuGraphInstantiate)           \
  X(cuGraphLaunch)                \
  X(cuGraphExecDestroy)           \
  X(cuGraphDestroy)               \
  X(cuEventCreate)                \
  X(cuEventDestroy)               \
  X(cuEventRecord)                \
  X(cuEventSynchronize)           \
  X(cuEventElapsedTime)           \
  X(cuTensorMapEncodeTiled)        \
  X(cuFuncGetParamInfo)

struct DriverApi {
#define CUJIT_DECLARE_MEMBER(name) decltype(&::name) name = nullptr;
  CUJIT_DRIVER_FUNCTIONS(CUJIT_DECLARE_MEMBER)
#undef CUJIT_DECLARE_MEMBER
};

// The driver table, loaded and cuInit-ed once. Throws Error(NoDevice) with the
// reason (no libcuda.so.1, cuInit failed) when there is no usable driver.
const DriverApi& driver();
// True when a driver is loadable and at least one GPU is visible; never throws.
bool gpu_available();

// True while `stream` is being captured into a CUDA graph: nothing may be
// timed or synchronized on it then.
bool stream_is_capturing(CUstream stream);

[[noreturn]] void throw_driver_error(CUresult result, const char* call, const char* file, int line);

}  // namespace jit::detail

// Checks a Driver API call; the error names the call, its error name and text.
#define CUJIT_CU_CHECK(call)                                                    \
  do {                                                                          \
    const CUresult cujit_result_ = (call);                                      \
    if (cujit_result_ != CUDA_SUCCESS)                                          \
      ::jit::detail::throw_driver_error(cujit_result_, #call, __FILE__, __LINE__); \
  } while (0)
