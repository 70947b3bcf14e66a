// Every config of the shipped attention spaces that survives pruning, and
// the runtime's own kernel (the L2 scrub), compiles with NVRTC for each
// supported arch, with zero spill bytes in the
// ptxas report and, for wgmma kernels, without ptxas serializing the wgmma
// (warnings C7512, C7515). No GPU needed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "autotune/prune.h"
#include "jit/attention/families.h"
#include "jit/kernel_family.h"
#include "jit/l2_scrub.h"
#include "jit/nvrtc_compiler.h"

namespace {

struct CompileCase {
  const jit::KernelFamily* family;
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
  // Every registered family, each head dim it is instantiated for.
  for (const jit::detail::FamilyRegistration& served : jit::detail::attention_families()) {
    for (const char* arch : {"sm_90a", "sm_89", "sm_80"}) {
      for (const char* dtype : dtypes) {
        for (int i = 0; i < served.head_dims.count; ++i) {
          const int d = served.head_dims.values[i];
          for (bool causal : {false, true}) {
            const jit::Json base = {{"dtype", dtype}, {"d", d}, {"causal", causal}};
            const jit::Target target = jit::offline_target(arch);
            const auto variants = served.family->spec_variants(base.get<jit::detail::AttnSpec>());
            for (const jit::detail::AttnSpec& variant : variants) {
              const jit::Json spec = variant;
              std::vector<jit::Json> configs = jit::autotune::prune_space(*served.family, spec, target).kept;
#ifndef CUJIT_COMPILE_ALL_DTYPES
              // A family's own spec variants (paged, ragged, row blocks):
              // their default config here, every config under compile_full.
              const bool base_spec = variant == base.get<jit::detail::AttnSpec>();
              if (!base_spec && !configs.empty()) configs = {served.family->default_config(spec, target)};
#endif
              for (const jit::Json& config : configs) {
                std::string name = arch + std::string("_") + served.family->variant_name(spec, config);
                cases.push_back({served.family, arch, spec, config, name});
              }
              if (configs.empty()) continue;  // this spec is not served on this arch
              for (const auto& companion : served.family->companions(spec)) {
                std::string name = arch + std::string("_") + companion.family->variant_name(companion.spec, companion.config);
                const bool seen = std::any_of(cases.begin(), cases.end(), [&](const CompileCase& c) { return c.name == name; });
                if (!seen) cases.push_back({companion.family, arch, companion.spec, companion.config, name});
              }
            }
          }
        }
      }
    }
  }
  for (const char* arch : {"sm_90a", "sm_89", "sm_80"}) {
    cases.push_back({&jit::detail::l2_scrub_family(), arch, jit::Json::object(), jit::Json::object(),
                     arch + std::string("_l2_scrub")});
  }
  return cases;
}

void PrintTo(const CompileCase& c, std::ostream* os) { *os << c.name; }

class KernelCompile : public testing::TestWithParam<CompileCase> {};

TEST_P(KernelCompile, CompilesWithoutSpills) {
  const CompileCase& c = GetParam();
  const jit::CompileReport report = jit::compile_variant(*c.family, c.spec, c.config, c.arch);
  EXPECT_GT(report.registers, 0) << "no ptxas report for " << report.variant;
  EXPECT_LE(report.registers, 255);
  EXPECT_EQ(report.spill_bytes, 0) << report.variant << " for " << c.arch << " spills " << report.spill_bytes
                                   << " bytes with " << report.registers << " registers";
  EXPECT_FALSE(report.wgmma_serialized) << report.variant << " for " << c.arch
                                        << ": ptxas serialized its wgmma (C7512/C7515)";
  RecordProperty("registers", report.registers);
}

INSTANTIATE_TEST_SUITE_P(Attention, KernelCompile, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<CompileCase>& info) { return info.param.name; });

TEST(KernelCompileSpace, EveryArchKeepsThePortableDefaultConfig) {
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

TEST(KernelCompileSpace, Sm90KeepsItsDefaultConfigOnlyOnSm90a) {
  const jit::KernelFamily& family = jit::detail::sm90_attention_family();
  for (int d : {64, 128, 256}) {
    const jit::Json spec = {{"dtype", "bf16"}, {"d", d}, {"causal", true}};
    const jit::Json config = family.default_config(spec, jit::offline_target("sm_90a"));
    const auto kept = family.why_pruned(spec, config, jit::offline_target("sm_90a"));
    EXPECT_FALSE(kept.has_value()) << "d" << d << ": " << *kept;
    EXPECT_TRUE(family.why_pruned(spec, config, jit::offline_target("sm_89")).has_value());
  }
}

}  // namespace

TEST(PtxasReport, ReadsResourcesAndSerializedWgmma) {
  const std::string report =
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
      "wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in "
      "the function 'k'\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 16 barriers\n";
  const jit::detail::ResourceUsage usage = jit::detail::parse_ptxas_report(report);
  EXPECT_EQ(usage.registers, 168);
  EXPECT_EQ(usage.spill_store_bytes, 4);
  EXPECT_EQ(usage.spill_load_bytes, 12);
  EXPECT_EQ(usage.stack_bytes, 8);
  EXPECT_TRUE(usage.wgmma_serialized);
  EXPECT_FALSE(jit::detail::parse_ptxas_report("ptxas info    : Used 128 registers\n").wgmma_serialized);
  // C7512: serialized because the overlapped code needs more registers than the function has.
  EXPECT_TRUE(jit::detail::parse_ptxas_report(
                  "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
                  "to insufficient register resources for the function 'k'\n")
                  .wgmma_serialized);
}
