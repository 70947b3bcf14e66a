// Tests for autotune/prune: static pruning of the portable attention family
// on offline targets, and the CUJIT_AUTOTUNE=fast shortlist.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "autotune/prune.h"
#include "jit/attention/families.h"
#include "jit/kernel_family.h"
#include "tuning_fakes.h"

using namespace cujit_test;

// --- prune_space on the portable family -------------------------------------------

namespace {
// The portable kernel's shared memory: a Q tile plus a K and V ring of `stages` BN tiles.
int portable_smem(const json& spec, const json& config) {
  return (config["bm"].get<int>() + 2 * config["stages"].get<int>() * config["bn"].get<int>()) *
         spec["d"].get<int>() * 2;
}
}  // namespace

TEST(PruneSpace, PortableFamilyOnSm89) {
  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  const jit::Target target = jit::offline_target("sm_89");
  ASSERT_EQ(target.max_smem_per_block, 101376);
  for (int d : {64, 128}) {
    for (const char* dtype : {"f16", "bf16"}) {
      const json spec = {{"dtype", dtype}, {"d", d}, {"causal", d == 128}};
      SCOPED_TRACE(spec.dump());
      const std::vector<json> space = family.config_space(spec);
      const jit::autotune::PrunedSpace pruned = jit::autotune::prune_space(family, spec, target);
      EXPECT_EQ(pruned.kept.size() + pruned.pruned.size(), space.size());
      EXPECT_FALSE(pruned.kept.empty());

      // Kept configs keep config-space order.
      std::size_t cursor = 0;
      for (const json& k : pruned.kept) {
        while (cursor < space.size() && space[cursor] != k) ++cursor;
        EXPECT_LT(cursor, space.size()) << "kept config out of order or unknown: " << k.dump();
      }

      // Nothing kept needs more shared memory than sm_89 allows.
      for (const json& k : pruned.kept) EXPECT_LE(portable_smem(spec, k), target.max_smem_per_block) << k.dump();

      int smem_pruned = 0;
      for (const auto& [config, reason] : pruned.pruned) {
        EXPECT_FALSE(reason.empty()) << config.dump();
        if (reason.find("shared memory") != std::string::npos) {
          ++smem_pruned;
          EXPECT_GT(portable_smem(spec, config), target.max_smem_per_block) << config.dump() << ": " << reason;
          EXPECT_NE(reason.find("sm_89"), std::string::npos) << reason;
        }
      }
      EXPECT_GT(smem_pruned, 0) << "some config should exceed sm_89's shared memory";

      // A structurally fine config that only exceeds the limit is pruned for shared memory:
      // BM 128, 8 warps, BN 128, 3 stages needs (128 + 768) * D * 2 bytes.
      const json big = {{"bm", 128}, {"bn", 128}, {"stages", 3}, {"warps", 8}};
      ASSERT_GT(portable_smem(spec, big), target.max_smem_per_block);
      const auto reason = family.why_pruned(spec, big, target);
      ASSERT_TRUE(reason.has_value());
      EXPECT_NE(reason->find("shared memory"), std::string::npos) << *reason;

      // The default config survives pruning.
      const json def = family.default_config(spec, target);
      EXPECT_EQ(family.why_pruned(spec, def, target), std::nullopt) << def.dump();
      EXPECT_NE(std::find(pruned.kept.begin(), pruned.kept.end(), def), pruned.kept.end()) << def.dump();
    }
  }
}

TEST(PruneSpace, DefaultConfigKeptOnEveryKnownArch) {
  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_120"}) {
    const jit::Target target = jit::offline_target(arch);
    for (int d : {64, 128}) {
      const json spec = {{"dtype", "f16"}, {"d", d}, {"causal", false}};
      const auto pruned = jit::autotune::prune_space(family, spec, target);
      const json def = family.default_config(spec, target);
      EXPECT_NE(std::find(pruned.kept.begin(), pruned.kept.end(), def), pruned.kept.end())
          << arch << " d" << d << " " << def.dump();
    }
  }
}

namespace {

TEST(Shortlist, DefaultFirstThenSpaceOrderWithoutRepeats) {
  const std::vector<nlohmann::json> kept = {{{"c", 1}}, {{"c", 2}}, {{"c", 3}}, {{"c", 4}}, {{"c", 5}}};
  const auto list = jit::autotune::shortlist({{"c", 3}}, kept, 4);
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0], (nlohmann::json{{"c", 3}}));
  EXPECT_EQ(list[1], (nlohmann::json{{"c", 1}}));
  EXPECT_EQ(list[2], (nlohmann::json{{"c", 2}}));
  EXPECT_EQ(list[3], (nlohmann::json{{"c", 4}}));
  EXPECT_EQ(jit::autotune::shortlist({{"c", 9}}, kept, 1).size(), 1u);
  EXPECT_EQ(jit::autotune::shortlist({{"c", 1}}, {{{"c", 1}}}, 4).size(), 1u);
}

}  // namespace
