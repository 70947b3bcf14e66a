/// @file tensor.h
/// A non-owning view of a device tensor, and an owning device buffer.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace jit {

/// Element types the kernels read and write.
enum class DType { f16, bf16 };

const char* to_string(DType dtype);
inline std::size_t element_size(DType) { return 2; }

/// Device memory viewed as a 4-D tensor. Attention reads q as
/// [B, H, S, D]: shape and strides (in elements) are given in that logical
/// order whatever the storage order, so [B, S, H, D] storage is a view with
/// permuted strides. The last dimension must be contiguous (stride 1).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f16;
  std::array<std::int64_t, 4> shape{};    ///< B, H, S, D
  std::array<std::int64_t, 4> strides{};  ///< elements

  /// Contiguous [B, H, S, D] storage.
  static TensorView bhsd(void* data, DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d);
  /// Contiguous [B, S, H, D] storage, viewed as [B, H, S, D].
  static TensorView bshd(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d);

  std::int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

/// Device memory owned by cujit (cuMemAlloc), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A tensor whose memory cujit allocated: what attention returns when the
/// caller gives no output.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
};

}  // namespace jit
