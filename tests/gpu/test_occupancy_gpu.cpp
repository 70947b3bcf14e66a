// The sm90 family sizes its persistent grid by the CTAs it expects to share
// an SM (smem_layout.h's ctas_per_sm: two for one consumer warpgroup, else
// one). Every config the tuner may time must really fit that many, or part
// of the grid would wait for the rest to finish before it starts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/attention/families.h"
#include "jit/kernel_family.h"

namespace cujit_test {
namespace {

TEST(Occupancy, EverySm90ConfigHasTheCtasPerSmItsGridAssumes) {
  CUJIT_REQUIRE_GPU();
  const jit::Target target = jit::current_target();
  if (target.arch != "sm_90a") GTEST_SKIP() << "the sm90 family needs sm_90a, this GPU is " << target.arch;
  const auto& family = jit::detail::sm90_attention_family();
  int shared_sm_configs = 0;
  for (const std::int64_t head_dim : {64, 128, 256}) {
    for (const bool causal : {false, true}) {
      jit::detail::AttnProblem problem;
      problem.batch = 8;
      problem.heads_q = problem.heads_kv = 32;
      problem.seq_q = problem.seq_k = 4096;  // tiles for every CTA of every grid
      problem.head_dim = head_dim;
      problem.causal = causal;
      problem.scale = 0.125f;
      const jit::Json spec = jit::detail::spec_of(problem);
      const std::vector<jit::Json> configs = kept_configs(family, spec);
      load_all(family, spec, configs);
      for (const jit::Json& config : configs) {
        const jit::LaunchGeometry geometry = family.plan(problem, config, target).steps[0].geometry;
        const int assumed = int((geometry.grid.x + target.sm_count - 1) / target.sm_count);
        const jit::Kernel& kernel = jit::get_kernel(family, spec, config);
        EXPECT_GE(kernel.resident_ctas_per_sm(geometry), assumed)
            << kernel.variant() << ": a grid of " << geometry.grid.x << " CTAs of " << geometry.block.x
            << " threads and " << geometry.smem_bytes << " bytes of shared memory on " << target.sm_count
            << " SMs";
        shared_sm_configs += assumed > 1;
      }
    }
  }
  EXPECT_GT(shared_sm_configs, 0) << "no kept config shares an SM: the test checked only the one-CTA case";
}

}  // namespace
}  // namespace cujit_test
