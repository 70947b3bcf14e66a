#include "jit/device.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include "jit/driver.h"
#include "jit/error.h"

namespace jit {

namespace {
struct ArchLimits {
  const char* arch;
  int cc;
  int max_smem_per_block;  // opt-in dynamic shared memory per block, bytes
};
// Published per-arch limits, used when compiling with no device present.
constexpr ArchLimits kKnownArchs[] = {
    {"sm_80", 80, 166912},  {"sm_86", 86, 101376},  {"sm_87", 87, 166912},  {"sm_89", 89, 101376},
    {"sm_90", 90, 232448},  {"sm_90a", 90, 232448}, {"sm_100", 100, 232448}, {"sm_120", 120, 101376},
};
}  // namespace

Target offline_target(const std::string& arch) {
  for (const ArchLimits& limits : kKnownArchs) {
    if (arch == limits.arch) return Target{arch, limits.cc, limits.max_smem_per_block, 0, ""};
  }
  std::string known;
  for (const ArchLimits& limits : kKnownArchs) known += std::string(known.empty() ? "" : ", ") + limits.arch;
  throw Error(ErrorCode::InvalidArgument, fmt::format("unknown arch '{}'; known: {}", arch, known));
}

namespace detail {

std::string arch_for_cc(int major, int minor) {
  if (major < 8) {
    throw Error(ErrorCode::Unsupported,
                fmt::format("compute capability {}.{} is not supported: cujit's kernels need sm_80 or newer "
                            "(mma.sync m16n8k16 and cp.async)",
                            major, minor));
  }
  if (major == 9 && minor == 0) return "sm_90a";
  return fmt::format("sm_{}{}", major, minor);
}

namespace {

DeviceInfo describe(CUcontext context) {
  const DriverApi& cu = driver();
  DeviceInfo info;
  info.context = context;
  CUJIT_CU_CHECK(cu.cuCtxGetDevice(&info.device));
  info.ordinal = int(info.device);
  int major = 0, minor = 0, smem = 0, sms = 0;
  CUJIT_CU_CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.device));
  CUJIT_CU_CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, info.device));
  CUJIT_CU_CHECK(
      cu.cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, info.device));
  CUJIT_CU_CHECK(cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, info.device));
  char name[256] = {};
  CUJIT_CU_CHECK(cu.cuDeviceGetName(name, sizeof(name), info.device));
  info.target = Target{arch_for_cc(major, minor), major * 10 + minor, smem, sms, name};
  return info;
}

}  // namespace

const DeviceInfo& current_device() {
  const DriverApi& cu = driver();
  CUcontext context = nullptr;
  CUJIT_CU_CHECK(cu.cuCtxGetCurrent(&context));
  // Fast path: the same context as last time on this thread.
  thread_local CUcontext last_context = nullptr;
  thread_local const DeviceInfo* last_info = nullptr;
  if (context != nullptr && context == last_context) return *last_info;

  if (context == nullptr) {
    int count = 0;
    CUJIT_CU_CHECK(cu.cuDeviceGetCount(&count));
    if (count == 0) throw Error(ErrorCode::NoDevice, "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)");
    CUdevice device = 0;
    CUJIT_CU_CHECK(cu.cuDeviceGet(&device, 0));
    CUJIT_CU_CHECK(cu.cuDevicePrimaryCtxRetain(&context, device));  // held for the process's life
    CUJIT_CU_CHECK(cu.cuCtxSetCurrent(context));
  }
  static std::mutex mutex;
  static auto* known = new std::map<CUcontext, std::unique_ptr<DeviceInfo>>();  // lives as long as contexts do
  std::lock_guard lock(mutex);
  auto& slot = (*known)[context];
  if (!slot) slot = std::make_unique<DeviceInfo>(describe(context));
  last_context = context;
  last_info = slot.get();
  return *slot;
}

}  // namespace detail
}  // namespace jit
