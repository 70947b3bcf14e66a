#include "jit/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace jit::detail {
namespace {

// cuda.h maps versioned entry points by macro (cuMemAlloc -> cuMemAlloc_v2):
// stringizing after expansion gives the symbol the driver exports.
#define CUJIT_STRINGIZE_EXPANDED(x) CUJIT_STRINGIZE(x)
#define CUJIT_STRINGIZE(x) #x

struct LoadedDriver {
  DriverApi api;
  std::string failure;  // empty when usable
};

LoadedDriver load_driver() {
  LoadedDriver loaded;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    loaded.failure = fmt::format(
        "the CUDA driver (libcuda.so.1) could not be loaded ({}); this machine has no NVIDIA driver or GPU. "
        "Kernels can still be compiled for a GPU elsewhere with cujit-warmup --arch",
        dlerror());
    return loaded;
  }
#define CUJIT_LOAD_SYMBOL(name)                                                                                \
  loaded.api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, CUJIT_STRINGIZE_EXPANDED(name)));        \
  if (loaded.api.name == nullptr) {                                                                            \
    loaded.failure = fmt::format("the CUDA driver lacks {} (driver too old; cujit needs CUDA 12.4 or newer)",    \
                                 CUJIT_STRINGIZE_EXPANDED(name));                                              \
    return loaded;                                                                                             \
  }
  CUJIT_DRIVER_FUNCTIONS(CUJIT_LOAD_SYMBOL)
#undef CUJIT_LOAD_SYMBOL
  const CUresult init = loaded.api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    loaded.api.cuGetErrorName(init, &name);
    loaded.failure = fmt::format("cuInit failed with {}: no usable GPU is visible (check nvidia-smi and "
                                 "CUDA_VISIBLE_DEVICES)",
                                 name ? name : "an unknown error");
  }
  return loaded;
}

const LoadedDriver& loaded_driver() {
  static const LoadedDriver loaded = load_driver();
  return loaded;
}

}  // namespace

const DriverApi& driver() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.failure.empty()) throw Error(ErrorCode::NoDevice, loaded.failure);
  return loaded.api;
}

bool gpu_available() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.failure.empty()) return false;
  int count = 0;
  return loaded.api.cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
}

bool stream_is_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUJIT_CU_CHECK(driver().cuStreamIsCapturing(stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void throw_driver_error(CUresult result, const char* call, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  const LoadedDriver& loaded = loaded_driver();
  if (loaded.api.cuGetErrorName) loaded.api.cuGetErrorName(result, &name);
  if (loaded.api.cuGetErrorString) loaded.api.cuGetErrorString(result, &text);
  throw Error(ErrorCode::Driver, fmt::format("{} failed with {} ({}) at {}:{}", call, name ? name : "?",
                                             text ? text : "no description", file, line));
}

}  // namespace jit::detail
