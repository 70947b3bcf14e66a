#include "family_configs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>
#include <thread>

#include "attention_check.h"
#include "autotune/prune.h"

namespace cujit_test {

std::vector<const jit::detail::AttentionFamily*> families_here() {
  const jit::Target target = jit::current_target();
  std::vector<const jit::detail::AttentionFamily*> families;
  for (const jit::detail::FamilyRegistration& r : jit::detail::attention_families()) {
    if (r.runs_on(target)) families.push_back(r.family);
  }
  return families;
}

std::vector<jit::Json> kept_configs(const jit::detail::AttentionFamily& family, const jit::Json& spec) {
  return jit::autotune::prune_space(family, spec, jit::current_target()).kept;
}

void load_all(const jit::detail::AttentionFamily& family, const jit::Json& spec, const std::vector<jit::Json>& configs) {
  std::atomic<std::size_t> next{0};
  std::vector<std::string> errors(configs.size());
  std::vector<std::thread> pool;
  const unsigned threads = std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), configs.size());
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < configs.size();) {
        try {
          (void)jit::get_kernel(family, spec, configs[i]);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(errors[i], "") << family.variant_name(spec, configs[i]);
  }
}

int for_every_config(const jit::detail::AttnProblem& problem,
                     const std::function<void(const jit::detail::AttentionFamily&, const jit::detail::AttnPlan&,
                                              void* workspace)>& body) {
  const jit::Target target = jit::current_target();
  int configs = 0;
  for (const auto* family : families_here()) {
    if (!family->supports(problem, target)) continue;
    const jit::Json spec = family->spec_for(problem);
    const std::vector<jit::Json> kept = kept_configs(*family, spec);
    load_all(*family, spec, kept);
    for (const jit::Json& config : kept) {
      SCOPED_TRACE(family->variant_name(spec, config));
      const jit::detail::AttnPlan plan = jit::detail::load_plan(*family, problem, config, target);
      jit::DeviceBuffer workspace(plan.workspace_bytes);
      if (workspace.size() != 0) poison(workspace.data(), workspace.size());
      body(*family, plan, workspace.data());
      ++configs;
    }
  }
  return configs;
}

int expect_every_config_matches(const jit::detail::AttnProblem& problem, const TestTensor& q, const TestTensor& k,
                                const TestTensor& v, TestTensor& out, jit::DeviceBuffer& lse,
                                const ReferenceProblem& reference, const ReferenceResult& expected) {
  return for_every_config(problem, [&](const jit::detail::AttentionFamily& family, const jit::detail::AttnPlan& plan,
                                       void* workspace) {
    poison(out.buffer.data(), out.buffer.size());
    poison(lse.data(), lse.size());
    family.launch(plan, problem, {q.view, k.view, v.view, out.view, static_cast<float*>(lse.data())}, workspace,
                  nullptr);
    synchronize();
    expect_output_matches(gather_logical(download_storage(out), out.view), expected, reference);
    expect_lse_matches(download_f32(lse.data(), expected.lse.size()), expected);
  });
}

std::string specialization_name(const ::testing::TestParamInfo<Specialization>& info) {
  return "d" + std::to_string(std::get<0>(info.param)) + "_" + jit::to_string(std::get<1>(info.param)) + "_" +
         (std::get<2>(info.param) ? "causal" : "full");
}

}  // namespace cujit_test
