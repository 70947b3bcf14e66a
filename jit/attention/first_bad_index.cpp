#include "jit/attention/first_bad_index.h"

#include <cuda.h>

#include <climits>

#include "jit/driver.h"
#include "jit/error.h"
#include "jit/log.h"

namespace jit::detail {

FirstBadIndex::FirstBadIndex() : buffer_(sizeof(std::int32_t)) {
  const std::int32_t none = INT_MAX;
  buffer_.upload(&none, sizeof none);
}

std::optional<std::int32_t> FirstBadIndex::after(Stream stream) const {
  CUJIT_CU_CHECK(driver().cuStreamSynchronize(reinterpret_cast<CUstream>(stream)));
  std::int32_t bad = 0;
  buffer_.download(&bad, sizeof bad);
  if (bad == INT_MAX) return std::nullopt;
  return bad;
}

bool can_check_on(Stream stream, const char* what) {
  if (!stream_is_capturing(reinterpret_cast<CUstream>(stream))) return true;
  log_info("CUJIT_CHECK: {} are not checked inside a graph capture", what);
  return false;
}

std::int32_t read_device_int32(const std::int32_t* device_address) {
  std::int32_t value = 0;
  CUJIT_CU_CHECK(driver().cuMemcpyDtoH(&value, reinterpret_cast<CUdeviceptr>(device_address), sizeof value));
  return value;
}

}  // namespace jit::detail
