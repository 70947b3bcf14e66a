#include "row_softmax_family.h"

#include <bit>
#include <string>

namespace example {
namespace {

// Device code: one block per row; each thread strides over the row, then a
// block-wide max and sum through shared memory.
constexpr const char* kSource = R"(
struct RowSoftmaxParams { const float* x; float* y; long long rows; long long cols; };

template <int THREADS>
__device__ float block_reduce(float value, bool is_max, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < THREADS / 32; ++w) value = is_max ? fmaxf(value, scratch[w]) : value + scratch[w];
  __syncthreads();
  return value;
}

template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) row_softmax(const __grid_constant__ RowSoftmaxParams p) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  __shared__ float scratch[THREADS / 32];
  const float* x = p.x + blockIdx.x * p.cols;
  float* y = p.y + blockIdx.x * p.cols;
  float row_max = -__int_as_float(0x7f800000);
  for (long long c = threadIdx.x; c < p.cols; c += THREADS * UNROLL) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long i = c + u * THREADS;
      if (i < p.cols) row_max = fmaxf(row_max, x[i]);
    }
  }
  row_max = block_reduce<THREADS>(row_max, true, scratch);
  float sum = 0.f;
  for (long long c = threadIdx.x; c < p.cols; c += THREADS) sum += __expf(x[c] - row_max);
  sum = block_reduce<THREADS>(sum, false, scratch);
  const float inv = 1.f / sum;
  for (long long c = threadIdx.x; c < p.cols; c += THREADS) y[c] = __expf(x[c] - row_max) * inv;
}
)";

}  // namespace

const jit::KernelSources& RowSoftmaxFamily::sources() const {
  static const jit::KernelSources sources{"row_softmax.cu", {{"row_softmax.cu", kSource}}};
  return sources;
}

std::vector<jit::Json> RowSoftmaxFamily::config_space(const jit::Json&) const {
  std::vector<jit::Json> space;
  for (int threads : {64, 128, 256, 512, 1024})
    for (int unroll : {1, 4}) space.push_back({{"threads", threads}, {"unroll", unroll}});
  return space;
}

std::optional<std::string> RowSoftmaxFamily::why_pruned(const jit::Json&, const jit::Json& config,
                                                       const jit::Target&) const {
  if (config.at("threads").get<int>() % 32 != 0) return "threads must be whole warps";
  return std::nullopt;
}

jit::Json RowSoftmaxFamily::default_config(const jit::Json&, const jit::Target&) const {
  return {{"threads", 256}, {"unroll", 4}};
}

std::string RowSoftmaxFamily::variant_name(const jit::Json&, const jit::Json& config) const {
  return "row_softmax_t" + std::to_string(config.at("threads").get<int>()) + "_u" +
         std::to_string(config.at("unroll").get<int>());
}

std::string RowSoftmaxFamily::name_expression(const jit::Json&, const jit::Json& config) const {
  return "row_softmax<" + std::to_string(config.at("threads").get<int>()) + ", " +
         std::to_string(config.at("unroll").get<int>()) + ">";
}

jit::LaunchGeometry RowSoftmaxFamily::geometry(std::int64_t rows, const jit::Json& config) const {
  jit::LaunchGeometry g;
  g.grid = {unsigned(rows), 1, 1};
  g.block = {config.at("threads").get<unsigned>(), 1, 1};
  return g;
}

void row_softmax(const float* x, float* y, std::int64_t rows, std::int64_t cols, jit::Stream stream) {
  static const RowSoftmaxFamily family;
  if (rows == 0 || cols == 0) return;
  const jit::Json spec = {{"dtype", "f32"}};
  const jit::Json bucket = {{"cols", std::bit_ceil(std::uint64_t(cols))}};
  // Candidates are timed writing to y, which this call overwrites anyway.
  const jit::Json config = jit::choose_config(
      family, spec, bucket,
      [&](const jit::Kernel& kernel, const jit::Json& candidate, jit::Stream s) {
        kernel.launch(family.geometry(rows, candidate), RowSoftmaxParams{x, y, rows, cols}, s);
      },
      stream);
  const jit::Kernel& kernel = jit::get_kernel(family, spec, config);
  kernel.launch(family.geometry(rows, config), RowSoftmaxParams{x, y, rows, cols}, stream);
}

}  // namespace example
