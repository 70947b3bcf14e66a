// Every attention family and config this GPU runs, for the suites that
// check each config rather than the default one (determinism, in one process
// and across processes; score growth; rowless warpgroups).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_support.h"
#include "jit/attention/families.h"
#include "jit/attention/attention_problem.h"
#include "jit/kernel_family.h"
#include "reference_attention.h"

namespace cujit_test {

/// The portable family, and the sm90 family on sm_90a.
std::vector<const jit::detail::AttentionFamily*> families_here();

/// The configs of `family` the tuner would time for `spec` on this GPU.
std::vector<jit::Json> kept_configs(const jit::detail::AttentionFamily& family, const jit::Json& spec);

/// Compiles (or loads) every config on all cores at once, so later launches
/// only look them up; a config that fails is reported through gtest.
void load_all(const jit::detail::AttentionFamily& family, const jit::Json& spec, const std::vector<jit::Json>& configs);

/// For every kept config of every family here that serves `problem` (each
/// family's configs compiled at once first): loads its plan and calls
/// body(family, plan, workspace) under a SCOPED_TRACE naming the variant;
/// the workspace holds plan.workspace_bytes, poisoned. Returns how many
/// configs ran: 0 where no family serves the problem here.
int for_every_config(const jit::detail::AttnProblem& problem,
                     const std::function<void(const jit::detail::AttentionFamily&, const jit::detail::AttnPlan&,
                                              void* workspace)>& body);

/// Launches every kept config of every family here that serves `problem` on
/// q, k and v into `out` and `lse` (both poisoned before each launch, so
/// nothing stale passes), and checks O and the LSE against `expected`.
/// Returns how many configs ran: 0 where no family serves the problem here.
int expect_every_config_matches(const jit::detail::AttnProblem& problem, const TestTensor& q, const TestTensor& k,
                                const TestTensor& v, TestTensor& out, jit::DeviceBuffer& lse,
                                const ReferenceProblem& reference, const ReferenceResult& expected);

/// A specialization of the attention kernels: head dim, dtype, causal.
using Specialization = std::tuple<std::int64_t, jit::DType, bool>;

/// Every specialization a family may serve, as gtest parameters.
inline auto every_specialization() {
  return ::testing::Combine(::testing::Values(std::int64_t{64}, std::int64_t{128}, std::int64_t{256}),
                            ::testing::Values(jit::DType::f16, jit::DType::bf16), ::testing::Bool());
}

/// "d64_f16_full", "d128_bf16_causal", ...
std::string specialization_name(const ::testing::TestParamInfo<Specialization>& info);

}  // namespace cujit_test
