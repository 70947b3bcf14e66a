// Every config of every attention family this GPU runs, for every
// specialization (head dim, dtype, causal or not), matches the float64
// reference and gives the same output bits on each of 100 launches (no
// atomics, no order-dependent reductions). The other GPU suites run default
// configs only, unless they tune. CUJIT_TEST_DETERMINISM_LAUNCHES sets the
// launch count (scripts/gpu-sanitize lowers it: a sanitizer checks every
// launch alike, at a hundred times the cost).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/attention_problem.h"
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

Inputs make_inputs(DType dtype, std::int64_t head_dim, bool causal, TestRng& rng) {
  const Dims4 q_dims{2, 4, 333, head_dim};
  const Dims4 kv_dims{2, 2, 777, head_dim};
  const std::vector<float> q = rng.normal_vector(std::size_t(count(q_dims)), dtype);
  const std::vector<float> k = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  const std::vector<float> v = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  Inputs in{make_tensor(Layout::bhsd, dtype, q_dims, &q), make_tensor(Layout::bhsd, dtype, kv_dims, &k),
            make_tensor(Layout::bhsd, dtype, kv_dims, &v), make_tensor(Layout::bhsd, dtype, q_dims), {}, {}, {}};
  jit::AttentionOptions options;
  options.causal = causal;
  options.align = jit::CausalAlign::BottomRight;
  in.problem = jit::detail::validate_attention(in.q.view, in.k.view, in.v.view, in.out.view, options);
  in.reference = {q_dims[0], q_dims[1], kv_dims[1], q_dims[2], kv_dims[2], head_dim, causal, kv_dims[2] - q_dims[2],
                  double(in.problem.scale)};
  in.expected = reference_attention(in.reference, q, k, v);
  return in;
}

int launches_per_config() {
  const char* value = std::getenv("CUJIT_TEST_DETERMINISM_LAUNCHES");
  return value != nullptr && std::atoi(value) > 1 ? std::atoi(value) : 100;
}

// Runs `launches` launches of one config and expects identical output bits;
// returns the first launch's output.
std::vector<std::uint16_t> expect_identical_runs(const jit::detail::AttentionFamily& family, const jit::Json& spec,
                                                 const jit::Json& config, Inputs& in, int launches) {
  const jit::detail::AttnPlan plan = jit::detail::load_plan(family, in.problem, config, jit::current_target());
  jit::DeviceBuffer workspace(plan.workspace_bytes);
  const std::string variant = family.variant_name(spec, config);
  std::vector<std::uint16_t> first;
  for (int i = 0; i < launches; ++i) {
    poison(in.out.buffer.data(), in.out.buffer.size());
    family.launch(plan, in.problem, {in.q.view, in.k.view, in.v.view, in.out.view, nullptr}, workspace.data(),
                  nullptr);
    synchronize();
    std::vector<std::uint16_t> bits = download_storage(in.out);
    if (i == 0) {
      first = std::move(bits);
      continue;
    }
    std::size_t differing = 0;
    for (std::size_t e = 0; e < bits.size(); ++e) differing += bits[e] != first[e];
    EXPECT_EQ(differing, 0u) << variant << ": launch " << i << " differs from launch 0 in " << differing
                             << " of " << bits.size() << " elements";
    if (differing != 0) break;
  }
  return first;
}

// One specialization: head dim, dtype, causal.
class Determinism : public ::testing::TestWithParam<Specialization> {};

TEST_P(Determinism, EveryConfigMatchesTheReferenceWithTheSameBitsOnEveryLaunch) {
  CUJIT_REQUIRE_GPU();
  const auto [head_dim, dtype, causal] = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const jit::Target target = jit::current_target();
  const int launches = launches_per_config();
  Inputs in = make_inputs(dtype, head_dim, causal, rng);
  std::vector<const jit::detail::AttentionFamily*> serving;
  for (const auto* family : families_here()) {
    if (family->supports(in.problem, target)) serving.push_back(family);
  }
  // D = 256 has only the sm90 family.
  if (serving.empty()) GTEST_SKIP() << "no family serves head dim " << head_dim << " on " << target.arch;
  int configs = 0;
  for (const auto* family : serving) {
    const jit::Json spec = family->spec_for(in.problem);
    const std::vector<jit::Json> kept = kept_configs(*family, spec);
    load_all(*family, spec, kept);
    for (const jit::Json& config : kept) {
      SCOPED_TRACE(family->variant_name(spec, config));
      const std::vector<std::uint16_t> bits = expect_identical_runs(*family, spec, config, in, launches);
      expect_output_matches(gather_logical(bits, in.out.view), in.expected, in.reference);
      ++configs;
    }
  }
  RecordProperty("configs", configs);
  RecordProperty("launches_per_config", launches);
  EXPECT_GT(configs, 0) << "every config of the serving families was pruned";
}

INSTANTIATE_TEST_SUITE_P(Specializations, Determinism, every_specialization(), specialization_name);

}  // namespace
}  // namespace cujit_test
