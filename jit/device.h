// The GPU in use: its context, compute capability and the NVRTC target for it.
#pragma once
#include <cuda.h>

#include <string>

#include "jit/kernel_family.h"

namespace jit::detail {

// NVRTC target for a compute capability: 9.0 -> "sm_90a" (wgmma and
// setmaxnreg need the arch-specific target), others -> "sm_XY". Throws
// Error(Unsupported) below sm_80.
std::string arch_for_cc(int major, int minor);

struct DeviceInfo {
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext context = nullptr;
  Target target;
};

// The device of the current context; when no context is current, device 0's
// primary context is made current (as the CUDA runtime does). Cached per
// context, so cheap on the hot path.
const DeviceInfo& current_device();

}  // namespace jit::detail
