#include "jit/tensor.h"

#include <utility>

#include "jit/device.h"
#include "jit/driver.h"

namespace jit {

const char* to_string(DType dtype) { return dtype == DType::f16 ? "f16" : "bf16"; }

TensorView TensorView::bhsd(void* data, DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return TensorView{data, dtype, {b, h, s, d}, {h * s * d, s * d, d, 1}};
}

TensorView TensorView::bshd(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  return TensorView{data, dtype, {b, h, s, d}, {s * h * d, d, h * d, 1}};
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  detail::current_device();  // makes a context current if none is
  CUdeviceptr ptr = 0;
  CUJIT_CU_CHECK(detail::driver().cuMemAlloc(&ptr, bytes));
  ptr_ = reinterpret_cast<void*>(ptr);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) detail::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) detail::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr_));
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace jit
