// Runs the row-softmax family on random data and checks it against the CPU;
// with no GPU, compiles its variants for sm_90a instead.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "row_softmax_family.h"

int main() {
  const example::RowSoftmaxFamily family;
  const jit::Json spec = {{"dtype", "f32"}};
  try {
    if (!jit::gpu_present()) {
      for (const jit::Json& config : family.config_space(spec)) {
        const jit::CompileReport r = jit::compile_variant(family, spec, config, "sm_90a");
        std::printf("%s: %d registers%s\n", r.variant.c_str(), r.registers, r.from_cache ? " (cached)" : "");
      }
      std::printf("no GPU: compiled for sm_90a only\n");
      return 0;
    }
    const std::int64_t rows = 4096, cols = 1000;
    std::vector<float> x(rows * cols), y(rows * cols);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (float& v : x) v = 4 * normal(rng);
    jit::DeviceBuffer dx(x.size() * 4), dy(y.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    example::row_softmax(static_cast<const float*>(dx.data()), static_cast<float*>(dy.data()), rows, cols);
    jit::synchronize(nullptr);
    dy.download(y.data(), y.size() * 4);
    double max_err = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
      for (std::int64_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) - m);
      for (std::int64_t c = 0; c < cols; ++c)
        max_err = std::max(max_err, std::abs(y[r * cols + c] - std::exp(double(x[r * cols + c]) - m) / s));
    }
    std::printf("row softmax %lldx%lld: max abs error %.2e\n", (long long)rows, (long long)cols, max_err);
    return max_err < 1e-5 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
