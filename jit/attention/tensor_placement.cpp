#include "jit/attention/tensor_placement.h"

#include <fmt/format.h>

#include "jit/driver.h"
#include "jit/error.h"

namespace jit::detail {
namespace {

void check_one(const char* name, const void* data, const DeviceInfo& device) {
  if (data == nullptr) return;  // an empty view or no LSE: nothing is accessed
  // One query for all three: unlike cuPointerGetAttribute, this does not fail
  // for an address the driver does not know; the attributes stay zero.
  unsigned memory_type = 0;
  int ordinal = -1;
  unsigned managed = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&memory_type, &ordinal, &managed};
  CUJIT_CU_CHECK(driver().cuPointerGetAttributes(3, attributes, values, reinterpret_cast<CUdeviceptr>(data)));
  if (managed) return;  // migrates to whichever GPU touches it
  if (memory_type == CU_MEMORYTYPE_DEVICE && ordinal == device.ordinal) return;
  const char* fix = "allocate it on that GPU or copy it there first";
  if (memory_type == CU_MEMORYTYPE_DEVICE) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{} is in the memory of GPU {}, but the kernel runs on GPU {} (the current context's "
                            "device): {}, or make GPU {}'s context current",
                            name, ordinal, device.ordinal, fix, ordinal));
  }
  const char* where = memory_type == CU_MEMORYTYPE_HOST ? "pinned host memory" : "not GPU memory (host memory?)";
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{} at {} is {}; the kernel runs on GPU {}: {}", name, data, where, device.ordinal, fix));
}

}  // namespace

void check_placement(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                     const float* lse, const DeviceInfo& device) {
  check_one("q", q.data, device);
  check_one("k", k.data, device);
  check_one("v", v.data, device);
  check_one("out", out.data, device);
  check_one("lse", lse, device);
}

}  // namespace jit::detail
