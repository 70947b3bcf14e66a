// The example family through the public API: every config compiles for each
// arch (CPU), and on a GPU it matches a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "row_softmax_family.h"

namespace {

TEST(RowSoftmaxFamily, EveryConfigCompilesForEachArch) {
  const example::RowSoftmaxFamily family;
  const jit::Json spec = {{"dtype", "f32"}};
  for (const char* arch : {"sm_90a", "sm_89", "sm_80"}) {
    for (const jit::Json& config : family.config_space(spec)) {
      ASSERT_FALSE(family.why_pruned(spec, config, jit::offline_target(arch)).has_value());
      const jit::CompileReport r = jit::compile_variant(family, spec, config, arch);
      EXPECT_GT(r.registers, 0) << r.variant;
      EXPECT_EQ(r.spill_bytes, 0) << r.variant;
    }
  }
}

TEST(RowSoftmaxFamily, MatchesFloat64ReferenceOnGpu) {
  if (!jit::gpu_present()) GTEST_SKIP() << "no GPU: the CUDA driver or a device is missing";
  std::random_device seed_source;
  const unsigned seed = seed_source();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (std::int64_t cols : {1, 31, 1000, 4099}) {
    const std::int64_t rows = 257;
    std::vector<float> x(rows * cols), y(rows * cols);
    for (float& v : x) v = 3 * normal(rng);
    jit::DeviceBuffer dx(x.size() * 4), dy(y.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    std::vector<unsigned char> poison(y.size() * 4, 0xff);  // NaN everywhere: unwritten outputs fail
    dy.upload(poison.data(), poison.size());
    example::row_softmax(static_cast<const float*>(dx.data()), static_cast<float*>(dy.data()), rows, cols);
    jit::synchronize(nullptr);
    dy.download(y.data(), y.size() * 4);
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
      for (std::int64_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) - m);
      for (std::int64_t c = 0; c < cols; ++c) {
        const double want = std::exp(double(x[r * cols + c]) - m) / s;
        ASSERT_NEAR(y[r * cols + c], want, 1e-5 + 1e-4 * want)
            << "row " << r << " col " << c << " cols " << cols << " seed " << seed;
      }
    }
  }
}

}  // namespace
