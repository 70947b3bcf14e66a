/// @file tensor.h
/// A non-owning view of a device tensor, and an owning device buffer.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace jit {

/// Element types the kernels read and write. e4m3 is FP8 with 4 exponent bits
/// and 3 mantissa bits (finite up to 448, no infinity: torch.float8_e4m3fn),
/// taken for FP8 attention (q, k and v) and KV caches (jit/serving.h). e5m2
/// is FP8 with 5 exponent bits and 2 mantissa bits (the upper byte of an f16,
/// finite up to 57344, with infinity: torch.float8_e5m2), taken for KV caches.
enum class DType { f16, bf16, e4m3, e5m2 };

const char* to_string(DType dtype);
inline bool is_fp8(DType dtype) { return dtype == DType::e4m3 || dtype == DType::e5m2; }
inline std::size_t element_size(DType dtype) { return is_fp8(dtype) ? 1 : 2; }

/// Device memory viewed as a 4-D tensor. Attention reads q as
/// [B, H, S, D]: shape and strides (in elements) are given in that logical
/// order whatever the storage order, so [B, S, H, D] storage is a view with
/// permuted strides. The last dimension must be contiguous (stride 1).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f16;
  std::array<std::int64_t, 4> shape{};    ///< B, H, S, D
  std::array<std::int64_t, 4> strides{};  ///< elements

  /// Contiguous [B, H, S, D] storage. Both throw Error(InvalidArgument) when a
  /// stride does not fit in int64.
  static TensorView bhsd(void* data, DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d);
  /// Contiguous [B, S, H, D] storage, viewed as [B, H, S, D].
  static TensorView bshd(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d);

  /// The element count; 0 when any size is 0. Throws Error(InvalidArgument)
  /// when it does not fit in int64 (attention's validation names the tensor first).
  std::int64_t numel() const;
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

  /// Synchronous copies from and to host memory (at most size() bytes).
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

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

/// A contiguous [B, H, S, D] tensor of uniform random values in [-1, 1), made
/// on the host from `seed` and uploaded: inputs for warm-up, tuning, benchmarks
/// (for FP8, values in [-1, 1) rounded to the format).
DeviceTensor random_tensor(DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
                           std::uint64_t seed);

/// Round-to-nearest-even conversions between float and an element's bits (in
/// the low byte for FP8: e4m3 values past 448 saturate to +-448, e5m2 ones
/// past 57344 round to infinity as f16's do; NaN stays NaN).
std::uint16_t float_to_bits(float value, DType dtype);
float bits_to_float(std::uint16_t bits, DType dtype);

}  // namespace jit
