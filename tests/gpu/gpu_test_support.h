// Support for the GPU test suites: Driver API helpers (through cujit's own
// dlopen-ed table, no CUDA runtime), host fp16/bf16 conversions, a seeded
// random generator, tensors in several storage layouts, and the process
// environment the suites run under.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "jit/driver.h"
#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace cujit_test {

// ---------------------------------------------------------------------------
// GPU presence

/// Why the GPU tests cannot run here, or nullopt when they can (a driver, a
/// visible device 0, compute capability 8.0 or newer). Never throws.
std::optional<std::string> gpu_skip_reason();

}  // namespace cujit_test

/// Skips the current test (GTEST_SKIP: use it in a test body or SetUp) when
/// there is no usable GPU, with the reason: "no GPU: <why>".
#define CUJIT_REQUIRE_GPU()                                                  \
  do {                                                                       \
    if (const auto cujit_skip_reason_ = ::cujit_test::gpu_skip_reason()) {   \
      GTEST_SKIP() << *cujit_skip_reason_;                                   \
    }                                                                        \
  } while (0)

namespace cujit_test {

// ---------------------------------------------------------------------------
// Driver API helpers. Every call is checked (CUJIT_CU_CHECK throws jit::Error).

/// Makes device 0's primary context current if no context is (as cujit does).
void ensure_context();
/// cuCtxSynchronize: waits for everything enqueued, on any stream.
void synchronize();
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
/// Fills with 0xFF bytes (NaN as fp16, bf16 and fp32) and waits for it.
void poison(void* dst, std::size_t bytes);
/// A new device buffer holding `bytes` bytes of `src`.
jit::DeviceBuffer upload_bytes(const void* src, std::size_t bytes);
std::vector<std::uint16_t> download_u16(const void* src, std::size_t count);
std::vector<float> download_f32(const void* src, std::size_t count);

constexpr std::uint16_t kPoison16 = 0xFFFF;

// ---------------------------------------------------------------------------
// Host conversions, round-to-nearest-even (NaN stays NaN, overflow gives inf).

std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);
/// e4m3 (FP8, no infinity): nearest of the finite values, ties to the even
/// code; past 448 saturates (as a quantizer does); NaN is 0x7f.
std::uint16_t float_to_e4m3_bits(float value);
float e4m3_bits_to_float(std::uint16_t bits);
/// e5m2 (FP8, an f16's upper byte): the same rounding, past 57344 to
/// infinity as f16.
std::uint16_t float_to_e5m2_bits(float value);
float e5m2_bits_to_float(std::uint16_t bits);

/// The bits of one element (FP8: in the low byte).
std::uint16_t encode(jit::DType dtype, float value);
float decode(jit::DType dtype, std::uint16_t bits);
/// Device storage of `values` as `dtype` (1 or 2 bytes per element).
jit::DeviceBuffer upload_values(const std::vector<float>& values, jit::DType dtype);
/// The value the device sees after storing `value` as `dtype`.
inline float round_to(jit::DType dtype, float value) { return decode(dtype, encode(dtype, value)); }

// ---------------------------------------------------------------------------
// Random numbers: a fresh seed per generator (std::random_device), or
// CUJIT_TEST_SEED when set, so that a failure can be replayed. The sequence
// for a seed is the same on every platform (mt19937_64, own distributions).

class TestRng {
 public:
  TestRng();
  explicit TestRng(std::uint64_t seed);

  std::uint64_t seed() const { return seed_; }
  /// "seed 1234 (replay: CUJIT_TEST_SEED=1234)": put it in failure messages
  /// (SCOPED_TRACE(rng.describe())).
  std::string describe() const;

  double uniform();  ///< [0, 1)
  double normal();   ///< N(0, 1)
  /// n normal values times `stddev`, each rounded to what `dtype` can hold.
  std::vector<float> normal_vector(std::size_t n, jit::DType dtype, double stddev = 1.0);

 private:
  std::uint64_t seed_;
  std::mt19937_64 engine_;
  std::optional<double> spare_normal_;
};

// ---------------------------------------------------------------------------
// Tensors. Host data is always in logical [B, H, S, D] order; the device copy
// is stored in one of these layouts and viewed as [B, H, S, D].

enum class Layout {
  bhsd,         ///< contiguous [B, H, S, D] (TensorView::bhsd)
  bshd,         ///< contiguous [B, S, H, D] (TensorView::bshd)
  bhsd_padded,  ///< [B, H, S, D + 8]: rows padded; the padding must stay untouched
};
const char* to_string(Layout layout);

using Dims4 = std::array<std::int64_t, 4>;  ///< B, H, S, D

struct Storage {
  Dims4 strides{};               ///< elements, logical [B, H, S, D] order
  std::int64_t elements = 0;     ///< the allocation, padding included
};
/// Padded rows are 16 bytes longer (8 elements of 16 bits, 16 of e4m3).
Storage storage_for(Layout layout, const Dims4& dims, jit::DType dtype = jit::DType::f16);

/// Logical index of (b, h, s, d) in a contiguous [B, H, S, D] host array.
inline std::size_t logical_index(const Dims4& dims, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return std::size_t(((b * dims[1] + h) * dims[2] + s) * dims[3] + d);
}
inline std::int64_t count(const Dims4& dims) { return dims[0] * dims[1] * dims[2] * dims[3]; }

/// A device tensor owned by the test.
struct TestTensor {
  jit::DeviceBuffer buffer;
  jit::TensorView view;
  Layout layout = Layout::bhsd;
  Dims4 dims{};
};

/// Allocates `dims` in `layout`. With `logical` (count(dims) values in logical
/// order, already representable in `dtype`) the elements are uploaded and the
/// padding is filled with NaN; without it the whole buffer is poisoned.
/// Inputs may be e4m3 (one byte each); outputs are 16-bit (download_storage).
TestTensor make_tensor(Layout layout, jit::DType dtype, const Dims4& dims,
                       const std::vector<float>* logical = nullptr);

/// The whole buffer behind a test tensor, as raw 16-bit elements.
std::vector<std::uint16_t> download_storage(const TestTensor& tensor);

/// The elements of `view` in logical order, read out of `storage` (which
/// starts at view.data).
std::vector<float> gather_logical(const std::vector<std::uint16_t>& storage, const jit::TensorView& view);

/// Elements of `storage` that `view` does not cover and that are no longer
/// kPoison16 (a write outside the view).
std::int64_t count_clobbered_padding(const std::vector<std::uint16_t>& storage, const jit::TensorView& view);

// ---------------------------------------------------------------------------
// Process environment.

/// A directory made with mkdtemp under $TMPDIR (or /tmp), removed on
/// destruction unless keep() was called.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

/// A stream with one graph captured on it and the graph's executable instance:
/// capture(enqueue) records what enqueue(stream) launches (global mode), and
/// replay() launches the instance and waits for it.
class CapturedRun {
 public:
  CapturedRun();
  ~CapturedRun();
  CapturedRun(const CapturedRun&) = delete;
  CapturedRun& operator=(const CapturedRun&) = delete;
  jit::Stream stream() const { return reinterpret_cast<jit::Stream>(stream_); }
  void capture(const std::function<void(jit::Stream)>& enqueue);
  void replay();

 private:
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

/// True when gtest was asked only to list the tests (test discovery): a main()
/// must then do nothing GPU-related and touch no environment.
bool listing_tests_only();

}  // namespace cujit_test
