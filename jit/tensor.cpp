#include "jit/tensor.h"

#include <fmt/format.h>

#include <bit>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"

namespace jit {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
  }
  return "unknown";
}

namespace {

// a * b, or an InvalidArgument saying which sizes overflow: a wrapped product
// would pass validation with the wrong count.
std::int64_t checked_product(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out) || __builtin_mul_overflow(out, c, &out) ||
      __builtin_mul_overflow(out, d, &out)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("sizes {} x {} x {} x {} overflow a 64-bit element count", a, b, c, d));
  }
  return out;
}

}  // namespace

std::int64_t TensorView::numel() const {
  for (std::int64_t size : shape) {
    if (size == 0) return 0;
  }
  return checked_product(shape[0], shape[1], shape[2], shape[3]);
}

namespace {

// e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7f is NaN.
std::uint16_t float_to_e4m3(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x80 : 0;
  const float abs = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7f;
  if (abs >= 464.f) return sign | 0x7e;  // past the midpoint of 448 and 480: saturate
  if (abs < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 steps is the smallest normal, 0x08)
    return sign | std::uint16_t(std::nearbyint(abs * 512.f));
  }
  int exponent = 0;
  const float fraction = std::frexp(abs, &exponent);  // abs = fraction * 2^exponent, fraction in [0.5, 1)
  const auto mantissa = std::uint16_t(std::nearbyint((fraction * 2.f - 1.f) * 8.f));  // 8 carries into the exponent
  return std::min<std::uint16_t>(sign | std::uint16_t((std::uint16_t(exponent + 6) << 3) + mantissa), sign | 0x7e);
}

float e4m3_to_float(std::uint16_t bits) {
  const float sign = bits & 0x80 ? -1.f : 1.f;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 7;
  if (exponent == 0xf && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -9);
  return sign * std::ldexp(1.f + float(mantissa) / 8.f, exponent - 7);
}

// e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits, as an f16's upper
// byte: 0x7c is infinity, 0x7d-0x7f NaN.
std::uint16_t float_to_e5m2(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x80 : 0;
  const float abs = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7f;
  if (abs >= 61440.f) return sign | 0x7c;  // the midpoint of 57344 and 65536 and past it: infinity
  if (abs < 6.103515625e-05f) {  // below 2^-14: subnormal steps of 2^-16 (4 steps is the smallest normal, 0x04)
    return sign | std::uint16_t(std::nearbyint(abs * 65536.f));
  }
  int exponent = 0;
  const float fraction = std::frexp(abs, &exponent);  // abs = fraction * 2^exponent, fraction in [0.5, 1)
  const auto mantissa = std::uint16_t(std::nearbyint((fraction * 2.f - 1.f) * 4.f));  // 4 carries into the exponent
  return sign | std::uint16_t((std::uint16_t(exponent + 14) << 2) + mantissa);
}

}  // namespace

TensorView TensorView::bhsd(void* data, DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return TensorView{data, dtype, {b, h, s, d}, {checked_product(h, s, d, 1), checked_product(s, d, 1, 1), d, 1}};
}

TensorView TensorView::bshd(void* data, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  return TensorView{data, dtype, {b, h, s, d}, {checked_product(s, h, d, 1), d, checked_product(h, d, 1, 1), 1}};
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  detail::current_device();  // makes a context current if none is
  CUdeviceptr ptr = 0;
  CUJIT_CU_CHECK(detail::driver().cuMemAlloc(&ptr, bytes));
  ptr_ = reinterpret_cast<void*>(ptr);
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw Error(ErrorCode::InvalidArgument, "upload larger than the buffer");
  if (bytes > 0) CUJIT_CU_CHECK(detail::driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(ptr_), host, bytes));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw Error(ErrorCode::InvalidArgument, "download larger than the buffer");
  if (bytes > 0) CUJIT_CU_CHECK(detail::driver().cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(ptr_), bytes));
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

std::uint16_t float_to_bits(float value, DType dtype) {
  if (dtype == DType::e4m3) return float_to_e4m3(value);
  if (dtype == DType::e5m2) return float_to_e5m2(value);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (dtype == DType::bf16) {
    if (std::isnan(value)) return std::uint16_t((bits >> 16) | 0x40);
    return std::uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  }
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const std::uint32_t abs = bits & 0x7fffffff;
  if (abs >= 0x7f800000) return std::uint16_t(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  if (abs >= 0x477ff000) return std::uint16_t(sign | 0x7c00);  // rounds past 65504: inf
  if (abs < 0x38800000) {  // below 2^-14: subnormal half, rounded to nearest even
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24: one unit = one subnormal step
    return std::uint16_t(sign | std::uint32_t(std::nearbyint(scaled)));
  }
  const std::uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
  return std::uint16_t(sign | ((rounded - 0x38000000) >> 13));
}

float bits_to_float(std::uint16_t bits, DType dtype) {
  if (dtype == DType::e4m3) return e4m3_to_float(bits);
  if (dtype == DType::e5m2) return bits_to_float(std::uint16_t((bits & 0xff) << 8), DType::f16);
  if (dtype == DType::bf16) return std::bit_cast<float>(std::uint32_t(bits) << 16);
  const std::uint32_t sign = std::uint32_t(bits & 0x8000) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1f;
  const std::uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

DeviceTensor random_tensor(DType dtype, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
                           std::uint64_t seed) {
  const std::size_t n = std::size_t(checked_product(b, h, s, d));
  std::vector<std::uint16_t> host(n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (auto& x : host) x = float_to_bits(uniform(rng), dtype);
  DeviceTensor t;
  t.buffer = DeviceBuffer(n * element_size(dtype));
  if (is_fp8(dtype)) {
    const std::vector<std::uint8_t> bytes(host.begin(), host.end());
    t.buffer.upload(bytes.data(), n);
  } else {
    t.buffer.upload(host.data(), n * element_size(dtype));
  }
  t.view = TensorView::bhsd(t.buffer.data(), dtype, b, h, s, d);
  return t;
}

}  // namespace jit
