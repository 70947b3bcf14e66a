#include "jit/attention/tensor_placement.h"

#include <fmt/format.h>

#include "jit/driver.h"
#include "jit/error.h"

namespace jit::detail {
namespace {

// `accessed`: the kernel reads or writes through `data` (a non-empty view, or
// an LSE that was asked for); only then is its memory checked, and a NULL
// pointer is refused rather than skipped.
void check_one(const char* name, const void* data, bool accessed, const DeviceInfo& device) {
  if (!accessed) return;
  if (data == nullptr) throw Error(ErrorCode::InvalidArgument, fmt::format("{} is a null pointer", name));
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

void check_pointer_placement(const char* name, const void* data, const DeviceInfo& device) {
  check_one(name, data, true, device);
}

void check_plan_context(CUcontext plan_context, const DeviceInfo& device) {
  if (device.context != plan_context) {
    throw Error(ErrorCode::InvalidArgument,
                "the plan was made in another CUDA context (or for another GPU) than the current one: make a plan "
                "per context");
  }
}

void check_varlen_placement(const VarlenBatch& batch, const DeviceInfo& device) {
  check_one("batch.cu_seqlens_q", batch.cu_seqlens_q, batch.batch > 0, device);
  check_one("batch.cu_seqlens_k", batch.cu_seqlens_k, batch.batch > 0, device);
}

void check_placement(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                     const float* lse, const DeviceInfo& device) {
  check_one("q", q.data, q.numel() != 0, device);
  check_one("k", k.data, k.numel() != 0, device);
  check_one("v", v.data, v.numel() != 0, device);
  check_one("out", out.data, out.numel() != 0, device);
  check_one("lse", lse, lse != nullptr, device);
}

}  // namespace jit::detail
