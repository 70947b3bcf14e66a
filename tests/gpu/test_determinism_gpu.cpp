// Every config of every attention family this GPU runs matches the float64
// reference and gives the same output bits on every launch (no atomics, no
// order-dependent reductions); the default config does so over 100 launches.
// (The other GPU suites run default configs only, unless they tune.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

#include "attention_check.h"
#include "autotune/prune.h"
#include "gpu_test_support.h"
#include "jit/attention_family.h"
#include "jit/attention_problem.h"
#include "jit/kernel_family.h"

namespace cujit_test {
namespace {

using jit::DType;

struct Inputs {
  TestTensor q, k, v, out;
  jit::detail::AttnProblem problem;
  ReferenceProblem reference;
  ReferenceResult expected;
};

Inputs make_inputs(std::int64_t head_dim, TestRng& rng) {
  const Dims4 q_dims{2, 4, 333, head_dim};
  const Dims4 kv_dims{2, 2, 777, head_dim};
  const DType dtype = DType::f16;
  const std::vector<float> q = rng.normal_vector(std::size_t(count(q_dims)), dtype);
  const std::vector<float> k = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  const std::vector<float> v = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  Inputs in{make_tensor(Layout::bhsd, dtype, q_dims, &q), make_tensor(Layout::bhsd, dtype, kv_dims, &k),
            make_tensor(Layout::bhsd, dtype, kv_dims, &v), make_tensor(Layout::bhsd, dtype, q_dims), {}};
  jit::AttentionOptions options;
  options.causal = true;
  options.align = jit::CausalAlign::BottomRight;
  in.problem = jit::detail::validate_attention(in.q.view, in.k.view, in.v.view, in.out.view, options);
  in.reference = {q_dims[0], q_dims[1], kv_dims[1], q_dims[2], kv_dims[2], head_dim, true, kv_dims[2] - q_dims[2],
                  double(in.problem.scale)};
  in.expected = reference_attention(in.reference, q, k, v);
  return in;
}

// Runs `launches` launches of one config and expects identical output bits;
// returns the first launch's output.
std::vector<std::uint16_t> expect_identical_runs(const jit::detail::AttentionFamily& family, const jit::Json& spec, const jit::Json& config,
                           Inputs& in, int launches) {
  const jit::Kernel& kernel = jit::get_kernel(family, spec, config);
  const jit::detail::AttnLaunch plan = family.plan(in.problem, config);
  std::vector<std::uint16_t> first;
  for (int i = 0; i < launches; ++i) {
    poison(in.out.buffer.data(), in.out.buffer.size());
    family.launch(kernel, plan, in.problem, {in.q.view, in.k.view, in.v.view, in.out.view, nullptr}, nullptr);
    synchronize();
    std::vector<std::uint16_t> bits = download_storage(in.out);
    if (i == 0) {
      first = std::move(bits);
      continue;
    }
    std::size_t differing = 0;
    for (std::size_t e = 0; e < bits.size(); ++e) differing += bits[e] != first[e];
    EXPECT_EQ(differing, 0u) << kernel.variant() << ": launch " << i << " differs from launch 0 in " << differing
                             << " of " << bits.size() << " elements";
    if (differing != 0) break;
  }
  return first;
}

std::vector<const jit::detail::AttentionFamily*> families_here() {
  std::vector<const jit::detail::AttentionFamily*> families = {&jit::detail::portable_attention_family()};
  if (jit::current_target().arch == "sm_90a") families.push_back(&jit::detail::sm90_attention_family());
  return families;
}

TEST(Determinism, EveryConfigMatchesTheReferenceWithTheSameBitsOnEveryLaunch) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const jit::Target target = jit::current_target();
  int configs = 0;
  for (const auto* family : families_here()) {
    for (std::int64_t d : {64, 128, 256}) {
      Inputs in = make_inputs(d, rng);
      if (!family->supports(in.problem, target)) continue;
      const jit::Json spec = jit::detail::AttentionFamily::spec_of(in.problem);
      for (const jit::Json& config : jit::autotune::prune_space(*family, spec, target).kept) {
        SCOPED_TRACE(family->variant_name(spec, config));
        const std::vector<std::uint16_t> bits = expect_identical_runs(*family, spec, config, in, 5);
        expect_output_matches(gather_logical(bits, in.out.view), in.expected, in.reference);
        ++configs;
      }
    }
  }
  RecordProperty("configs", configs);
  EXPECT_GT(configs, 0);
}

TEST(Determinism, DefaultConfigGivesTheSameBitsOverAHundredLaunches) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const jit::Target target = jit::current_target();
  for (const auto* family : families_here()) {
    Inputs in = make_inputs(128, rng);
    const jit::Json spec = jit::detail::AttentionFamily::spec_of(in.problem);
    expect_identical_runs(*family, spec, family->default_config(spec, target), in, 100);
  }
}

}  // namespace
}  // namespace cujit_test
