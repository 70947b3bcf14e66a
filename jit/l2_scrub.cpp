#include "jit/l2_scrub.h"

#include <algorithm>

#include "jit/device.h"
#include "jit/driver.h"
#include "jit/fixed_kernel_family.h"
#include "kernel_src/common/l2_scrub_params.h"

namespace jit::detail {

const KernelFamily& l2_scrub_family() {
  static const FixedKernelFamily family(
      "l2_scrub", "common/l2_scrub.cu", [](const Json&) { return std::string("l2_scrub"); },
      [](const Json&) { return std::string("cujit::l2_scrub"); });
  return family;
}

L2Scrubber::L2Scrubber(L2Flush kind, std::size_t bytes) : kind_(kind), buffer_(bytes / 16 * 16) {
  CUJIT_CU_CHECK(driver().cuMemsetD8(reinterpret_cast<CUdeviceptr>(buffer_.data()), 0, buffer_.size()));
  if (kind_ != L2Flush::read) return;
  kernel_ = &get_kernel(l2_scrub_family(), Json::object(), Json::object());
  geometry_.grid = {unsigned(current_device().target.sm_count * cujit::kL2ScrubCtasPerSm), 1, 1};
  geometry_.block = {unsigned(cujit::kL2ScrubThreads), 1, 1};
  sink_ = DeviceBuffer(std::size_t(geometry_.grid.x) * cujit::kL2ScrubThreads / 32 * sizeof(unsigned));
}

std::size_t tuning_scrub_bytes() {
  int l2 = 0;
  CUJIT_CU_CHECK(driver().cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, current_device().device));
  return std::max(std::size_t(2) * std::size_t(l2), std::size_t(64) << 20);
}

void L2Scrubber::run(Stream stream) const {
  if (kind_ == L2Flush::overwrite) {
    CUJIT_CU_CHECK(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(buffer_.data()), 0, buffer_.size(), reinterpret_cast<CUstream>(stream)));
    return;
  }
  cujit::L2ScrubParams p{};
  p.data = buffer_.data();
  p.chunks = buffer_.size() / 16;
  p.sink = static_cast<unsigned*>(sink_.data());
  kernel_->launch(geometry_, p, stream);
}

}  // namespace jit::detail
