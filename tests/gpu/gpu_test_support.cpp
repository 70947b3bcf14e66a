#include "gpu_test_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <utility>

#include "jit/device.h"
#include "jit/error.h"

namespace cujit_test {

// ---------------------------------------------------------------------------
// GPU presence

std::optional<std::string> gpu_skip_reason() {
  if (!jit::detail::gpu_available()) {
    std::string why;
    try {
      jit::detail::driver();  // throws Error(NoDevice) with the reason when the driver is unusable
      why = "the CUDA driver is loaded but reports no device (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    } catch (const std::exception& e) {
      why = e.what();
    }
    return "no GPU: " + why;
  }
  try {
    const jit::detail::DriverApi& cu = jit::detail::driver();
    CUdevice device = 0;
    int major = 0, minor = 0;
    CUJIT_CU_CHECK(cu.cuDeviceGet(&device, 0));
    CUJIT_CU_CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CUJIT_CU_CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    if (major < 8) {
      return fmt::format("unsupported GPU: device 0 has compute capability {}.{}; cujit's kernels need 8.0 or newer",
                         major, minor);
    }
  } catch (const std::exception& e) {
    return std::string("no GPU: ") + e.what();
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Driver API helpers

namespace {
CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
}  // namespace

void ensure_context() { jit::detail::current_device(); }

void synchronize() {
  ensure_context();
  CUJIT_CU_CHECK(jit::detail::driver().cuCtxSynchronize());
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  ensure_context();
  CUJIT_CU_CHECK(jit::detail::driver().cuMemcpyHtoD(dptr(dst), src, bytes));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  ensure_context();
  CUJIT_CU_CHECK(jit::detail::driver().cuMemcpyDtoH(dst, dptr(src), bytes));
}

void poison(void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  ensure_context();
  CUJIT_CU_CHECK(jit::detail::driver().cuMemsetD8(dptr(dst), 0xFF, bytes));
  synchronize();  // a memset of device memory may return before it is done
}

jit::DeviceBuffer upload_bytes(const void* src, std::size_t bytes) {
  jit::DeviceBuffer buffer(bytes);
  copy_to_device(buffer.data(), src, bytes);
  return buffer;
}

std::vector<std::uint16_t> download_u16(const void* src, std::size_t count) {
  std::vector<std::uint16_t> out(count);
  copy_to_host(out.data(), src, count * sizeof(std::uint16_t));
  return out;
}

std::vector<float> download_f32(const void* src, std::size_t count) {
  std::vector<float> out(count);
  copy_to_host(out.data(), src, count * sizeof(float));
  return out;
}

// ---------------------------------------------------------------------------
// Host conversions

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exponent = (x >> 23) & 0xFFu;
  std::uint32_t mantissa = x & 0x7FFFFFu;
  if (exponent == 0xFFu) {  // inf, or NaN (kept quiet and NaN)
    return std::uint16_t(sign | 0x7C00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int e = int(exponent) - 127 + 15;  // biased half exponent
  if (e >= 0x1F) return std::uint16_t(sign | 0x7C00u);  // too large: inf
  if (e <= 0) {
    // Half subnormal (or zero): value / 2^-24 rounded to an integer.
    if (e < -10) return std::uint16_t(sign);  // below half the smallest subnormal (float subnormals too)
    mantissa |= 0x800000u;                      // the implicit bit
    const int shift = 14 - e;                   // 14..24
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;  // may carry into the normal range
    return std::uint16_t(sign | half);
  }
  std::uint32_t half = sign | (std::uint32_t(e) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) ++half;  // a carry may reach inf: correct
  return std::uint16_t(half);
}

float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = std::uint32_t(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: exact in float
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((x >> 16) | 0x40u);  // NaN: keep it NaN, quiet
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even; overflow reaches inf
  return std::uint16_t(x >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t(bits) << 16); }

float e4m3_bits_to_float(std::uint16_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 7;
  if (exponent == 0xf && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return float(bits & 0x80 ? -magnitude : magnitude);
}

namespace {

// The code of the magnitude nearest x (codes 0, 1, ... in increasing order
// of `magnitudes`) by binary search, ties to the even code; `past` beyond
// the last.
std::uint16_t nearest_code(const std::vector<float>& magnitudes, float x, std::uint16_t past) {
  const auto above = std::lower_bound(magnitudes.begin(), magnitudes.end(), x);
  if (above == magnitudes.end()) return past;
  auto code = std::uint16_t(above - magnitudes.begin());
  if (code > 0) {
    const float up = *above - x, down = x - magnitudes[code - 1];
    if (down < up || (down == up && code % 2 == 1)) --code;
  }
  return code;
}

}  // namespace

std::uint16_t float_to_e4m3_bits(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | 0x7f;
  // The finite magnitudes are codes 0..0x7e; past 448, saturated.
  static const std::vector<float> magnitudes = [] {
    std::vector<float> all(0x7f);
    for (std::uint16_t code = 0; code < 0x7f; ++code) all[code] = e4m3_bits_to_float(code);
    return all;
  }();
  return sign | nearest_code(magnitudes, std::fabs(value), 0x7e);
}

float e5m2_bits_to_float(std::uint16_t bits) {
  const int exponent = (bits >> 2) & 0x1f, mantissa = bits & 3;
  if (exponent == 0x1f) {
    return mantissa != 0 ? std::numeric_limits<float>::quiet_NaN()
                         : (bits & 0x80 ? -1.f : 1.f) * std::numeric_limits<float>::infinity();
  }
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 4.0, -14) : std::ldexp(1.0 + mantissa / 4.0, exponent - 15);
  return float(bits & 0x80 ? -magnitude : magnitude);
}

std::uint16_t float_to_e5m2_bits(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | 0x7f;
  // Codes 0..0x7b are finite and 0x7c is infinity, which rounds as 65536
  // would: past the midpoint of 57344 and 65536, infinity.
  static const std::vector<float> magnitudes = [] {
    std::vector<float> all(0x7c);
    for (std::uint16_t code = 0; code < 0x7c; ++code) all[code] = e5m2_bits_to_float(code);
    all.push_back(65536.f);
    return all;
  }();
  return sign | nearest_code(magnitudes, std::fabs(value), 0x7c);
}

std::uint16_t encode(jit::DType dtype, float value) {
  switch (dtype) {
    case jit::DType::f16: return float_to_half_bits(value);
    case jit::DType::bf16: return float_to_bf16_bits(value);
    case jit::DType::e4m3: return float_to_e4m3_bits(value);
    case jit::DType::e5m2: return float_to_e5m2_bits(value);
  }
  throw std::logic_error("encode: unknown dtype");
}

float decode(jit::DType dtype, std::uint16_t bits) {
  switch (dtype) {
    case jit::DType::f16: return half_bits_to_float(bits);
    case jit::DType::bf16: return bf16_bits_to_float(bits);
    case jit::DType::e4m3: return e4m3_bits_to_float(bits);
    case jit::DType::e5m2: return e5m2_bits_to_float(bits);
  }
  throw std::logic_error("decode: unknown dtype");
}

jit::DeviceBuffer upload_values(const std::vector<float>& values, jit::DType dtype) {
  if (jit::is_fp8(dtype)) {
    std::vector<std::uint8_t> bytes(values.size());
    std::transform(values.begin(), values.end(), bytes.begin(), [&](float x) { return std::uint8_t(encode(dtype, x)); });
    return upload_bytes(bytes.data(), bytes.size());
  }
  std::vector<std::uint16_t> bits(values.size());
  std::transform(values.begin(), values.end(), bits.begin(), [&](float x) { return encode(dtype, x); });
  return upload_bytes(bits.data(), bits.size() * sizeof(std::uint16_t));
}

// ---------------------------------------------------------------------------
// Random numbers

namespace {

std::uint64_t fresh_seed() {
  if (const char* text = std::getenv("CUJIT_TEST_SEED"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    const unsigned long long seed = std::strtoull(text, &end, 0);
    if (end == text || *end != '\0') {
      throw std::invalid_argument(fmt::format("CUJIT_TEST_SEED='{}' is not an unsigned integer", text));
    }
    return seed;
  }
  std::random_device device;
  return (std::uint64_t(device()) << 32) ^ std::uint64_t(device());
}

}  // namespace

TestRng::TestRng() : TestRng(fresh_seed()) {}

TestRng::TestRng(std::uint64_t seed) : seed_(seed), engine_(seed) {}

std::string TestRng::describe() const { return fmt::format("seed {} (replay: CUJIT_TEST_SEED={})", seed_, seed_); }

double TestRng::uniform() { return double(engine_() >> 11) * 0x1.0p-53; }

double TestRng::normal() {
  if (spare_normal_) return *std::exchange(spare_normal_, std::nullopt);
  // Box-Muller; 1 - uniform() lies in (0, 1], so the log is finite.
  const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
  const double angle = 2.0 * std::numbers::pi * uniform();
  spare_normal_ = radius * std::sin(angle);
  return radius * std::cos(angle);
}

std::vector<float> TestRng::normal_vector(std::size_t n, jit::DType dtype, double stddev) {
  std::vector<float> out(n);
  for (float& x : out) x = round_to(dtype, float(normal() * stddev));
  return out;
}

// ---------------------------------------------------------------------------
// Tensors

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::bhsd: return "bhsd";
    case Layout::bshd: return "bshd";
    case Layout::bhsd_padded: return "bhsdpad";
  }
  return "?";
}

Storage storage_for(Layout layout, const Dims4& dims, jit::DType dtype) {
  const auto [b, h, s, d] = dims;
  switch (layout) {
    case Layout::bhsd: return {{h * s * d, s * d, d, 1}, b * h * s * d};
    case Layout::bshd: return {{s * h * d, d, h * d, 1}, b * s * h * d};
    case Layout::bhsd_padded: {
      // 16 bytes more: keeps every row 16-byte aligned.
      const std::int64_t pitch = d + 16 / std::int64_t(jit::element_size(dtype));
      return {{h * s * pitch, s * pitch, pitch, 1}, b * h * s * pitch};
    }
  }
  throw std::logic_error("unknown layout");
}

namespace {

jit::TensorView view_for(Layout layout, jit::DType dtype, void* data, const Dims4& dims) {
  const auto [b, h, s, d] = dims;
  jit::TensorView view;
  switch (layout) {
    case Layout::bhsd: view = jit::TensorView::bhsd(data, dtype, b, h, s, d); break;
    case Layout::bshd: view = jit::TensorView::bshd(data, dtype, b, s, h, d); break;  // note: (b, s, h, d)
    case Layout::bhsd_padded: view = jit::TensorView{data, dtype, dims, storage_for(layout, dims, dtype).strides}; break;
  }
  // The factories must agree with the layouts the host side scatters into.
  if (view.shape != dims || view.strides != storage_for(layout, dims, dtype).strides) {
    throw std::logic_error(fmt::format("TensorView for layout {} has shape [{}] strides [{}], expected [{}] [{}]",
                                       to_string(layout), fmt::join(view.shape, ", "), fmt::join(view.strides, ", "),
                                       fmt::join(dims, ", "), fmt::join(storage_for(layout, dims, dtype).strides, ", ")));
  }
  return view;
}

std::int64_t offset_of(const jit::TensorView& view, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return b * view.strides[0] + h * view.strides[1] + s * view.strides[2] + d * view.strides[3];
}

}  // namespace

TestTensor make_tensor(Layout layout, jit::DType dtype, const Dims4& dims, const std::vector<float>* logical) {
  const Storage storage = storage_for(layout, dims, dtype);
  TestTensor t;
  t.layout = layout;
  t.dims = dims;
  t.buffer = jit::DeviceBuffer(std::size_t(storage.elements) * jit::element_size(dtype));
  t.view = view_for(layout, dtype, t.buffer.data(), dims);
  if (storage.elements == 0) return t;
  if (logical == nullptr) {
    poison(t.buffer.data(), t.buffer.size());
    return t;
  }
  if (std::int64_t(logical->size()) != count(dims)) {
    throw std::logic_error(fmt::format("make_tensor: {} values for {} elements", logical->size(), count(dims)));
  }
  std::vector<std::uint16_t> host(std::size_t(storage.elements), kPoison16);
  for (std::int64_t b = 0; b < dims[0]; ++b)
    for (std::int64_t h = 0; h < dims[1]; ++h)
      for (std::int64_t s = 0; s < dims[2]; ++s)
        for (std::int64_t d = 0; d < dims[3]; ++d)
          host[std::size_t(offset_of(t.view, b, h, s, d))] = encode(dtype, (*logical)[logical_index(dims, b, h, s, d)]);
  if (jit::element_size(dtype) == 1) {
    const std::vector<std::uint8_t> bytes(host.begin(), host.end());  // 0xFF padding: NaN in e4m3 too
    copy_to_device(t.buffer.data(), bytes.data(), bytes.size());
  } else {
    copy_to_device(t.buffer.data(), host.data(), host.size() * sizeof(std::uint16_t));
  }
  return t;
}

std::vector<std::uint16_t> download_storage(const TestTensor& tensor) {
  return download_u16(tensor.buffer.data(), tensor.buffer.size() / sizeof(std::uint16_t));
}

std::vector<float> gather_logical(const std::vector<std::uint16_t>& storage, const jit::TensorView& view) {
  const Dims4 dims = view.shape;
  std::vector<float> out(std::size_t(count(dims)));
  for (std::int64_t b = 0; b < dims[0]; ++b)
    for (std::int64_t h = 0; h < dims[1]; ++h)
      for (std::int64_t s = 0; s < dims[2]; ++s)
        for (std::int64_t d = 0; d < dims[3]; ++d) {
          const std::int64_t at = offset_of(view, b, h, s, d);
          if (at < 0 || at >= std::int64_t(storage.size())) {
            throw std::logic_error(fmt::format("gather_logical: element {} lies outside the {} downloaded", at,
                                               storage.size()));
          }
          out[logical_index(dims, b, h, s, d)] = decode(view.dtype, storage[std::size_t(at)]);
        }
  return out;
}

std::int64_t count_clobbered_padding(const std::vector<std::uint16_t>& storage, const jit::TensorView& view) {
  std::vector<bool> covered(storage.size(), false);
  const Dims4 dims = view.shape;
  for (std::int64_t b = 0; b < dims[0]; ++b)
    for (std::int64_t h = 0; h < dims[1]; ++h)
      for (std::int64_t s = 0; s < dims[2]; ++s)
        for (std::int64_t d = 0; d < dims[3]; ++d) {
          const std::int64_t at = offset_of(view, b, h, s, d);
          if (at >= 0 && at < std::int64_t(covered.size())) covered[std::size_t(at)] = true;
        }
  std::int64_t clobbered = 0;
  for (std::size_t i = 0; i < storage.size(); ++i) clobbered += (!covered[i] && storage[i] != kPoison16) ? 1 : 0;
  return clobbered;
}

// ---------------------------------------------------------------------------
// Process environment

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp")) + "/" + prefix +
                        ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error(fmt::format("mkdtemp({}) failed: {}", pattern, std::strerror(errno)));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_ || path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CapturedRun::CapturedRun() {
  ensure_context();
  CUJIT_CU_CHECK(jit::detail::driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

CapturedRun::~CapturedRun() {
  const jit::detail::DriverApi& cu = jit::detail::driver();
  if (exec_) cu.cuGraphExecDestroy(exec_);
  if (graph_) cu.cuGraphDestroy(graph_);
  if (stream_) cu.cuStreamDestroy(stream_);
}

void CapturedRun::capture(const std::function<void(jit::Stream)>& enqueue) {
  const jit::detail::DriverApi& cu = jit::detail::driver();
  CUJIT_CU_CHECK(cu.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  try {
    enqueue(stream());
  } catch (...) {
    cu.cuStreamEndCapture(stream_, &graph_);  // the capture must end on every path
    throw;
  }
  CUJIT_CU_CHECK(cu.cuStreamEndCapture(stream_, &graph_));
  ASSERT_NE(graph_, nullptr);
  CUJIT_CU_CHECK(cu.cuGraphInstantiate(&exec_, graph_, 0));
}

void CapturedRun::replay() {
  const jit::detail::DriverApi& cu = jit::detail::driver();
  CUJIT_CU_CHECK(cu.cuGraphLaunch(exec_, stream_));
  CUJIT_CU_CHECK(cu.cuStreamSynchronize(stream_));
}

bool listing_tests_only() { return GTEST_FLAG_GET(list_tests); }

}  // namespace cujit_test
