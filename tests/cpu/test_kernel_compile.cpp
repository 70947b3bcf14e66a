// Every config of the shipped attention spaces that survives pruning
// compiles with NVRTC for each supported arch, with zero spill bytes in the
// ptxas report. No GPU needed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "autotune/prune.h"
#include "jit/attention_family.h"
#include "jit/kernel_family.h"

namespace {

struct CompileCase {
  std::string arch;
  jit::Json spec;
  jit::Json config;
  std::string name;
};

std::vector<CompileCase> all_cases() {
  std::vector<CompileCase> cases;
#ifdef CUJIT_COMPILE_ALL_DTYPES
  const char* dtypes[] = {"f16", "bf16"};
#else
  const char* dtypes[] = {"f16"};
#endif
  const jit::KernelFamily& family = jit::detail::portable_attention_family();
  for (const char* arch : {"sm_90a", "sm_89", "sm_80"}) {
    for (const char* dtype : dtypes) {
      for (int d : {64, 128}) {
        for (bool causal : {false, true}) {
          const jit::Json spec = {{"dtype", dtype}, {"d", d}, {"causal", causal}};
          for (const jit::Json& config : jit::autotune::prune_space(family, spec, jit::offline_target(arch)).kept) {
            std::string name = arch + std::string("_") + family.variant_name(spec, config);
            cases.push_back({arch, spec, config, name});
          }
        }
      }
    }
  }
  return cases;
}

void PrintTo(const CompileCase& c, std::ostream* os) { *os << c.name; }

class KernelCompile : public testing::TestWithParam<CompileCase> {};

TEST_P(KernelCompile, CompilesWithoutSpills) {
  const CompileCase& c = GetParam();
  const jit::CompileReport report =
      jit::compile_variant(jit::detail::portable_attention_family(), c.spec, c.config, c.arch);
  EXPECT_GT(report.registers, 0) << "no ptxas report for " << report.variant;
  EXPECT_LE(report.registers, 255);
  EXPECT_EQ(report.spill_bytes, 0) << report.variant << " for " << c.arch << " spills " << report.spill_bytes
                                   << " bytes with " << report.registers << " registers";
  RecordProperty("registers", report.registers);
}

INSTANTIATE_TEST_SUITE_P(Portable, KernelCompile, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<CompileCase>& info) { return info.param.name; });

TEST(KernelCompileSpace, EveryArchKeepsTheDefaultConfig) {
  const jit::KernelFamily& family = jit::detail::portable_attention_family();
  for (const char* arch : {"sm_90a", "sm_89", "sm_80", "sm_86"}) {
    const jit::Target target = jit::offline_target(arch);
    for (int d : {64, 128}) {
      const jit::Json spec = {{"dtype", "f16"}, {"d", d}, {"causal", false}};
      const jit::Json config = family.default_config(spec, target);
      EXPECT_FALSE(family.why_pruned(spec, config, target).has_value())
          << arch << " d" << d << ": " << *family.why_pruned(spec, config, target);
    }
  }
}

}  // namespace
