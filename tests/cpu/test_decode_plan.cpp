// Tests for the decode family's plans (jit/attention/decode/decode_family.cpp):
// how a split's parts are merged on each target. No GPU (offline targets).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "jit/attention/families.h"
#include "kernel_src/attention/decode/decode_layout.h"
#include "kernel_src/attention/decode/decode_params.h"

namespace {

using jit::detail::AttnPlan;
using jit::detail::AttnProblem;

// One long sequence over a cache: few (sequence, KV head) pairs, so it splits.
AttnProblem long_decode(int num_splits) {
  AttnProblem p;
  p.batch = 1;
  p.heads_q = 32;
  p.heads_kv = 8;
  p.seq_q = 1;
  p.seq_k = 32768;
  p.head_dim = 128;
  p.dtype = jit::DType::bf16;
  p.causal = true;
  p.scale = 0.088f;
  p.page_size = 16;
  p.seq_lens = true;
  p.num_splits = num_splits;
  return p;
}

jit::Target target(const char* arch) {
  jit::Target t = jit::offline_target(arch);
  t.sm_count = 132;
  return t;
}

AttnPlan plan_for(const AttnProblem& p, const jit::Target& t) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Json spec = decode.spec_for(p);
  return decode.plan(p, decode.default_config(spec, t), t);
}

TEST(DecodePlan, Sm90MergesUpToTheClusterLimitOfSplitsInTheirClusterWithNoCombineOrWorkspace) {
  for (int splits = 2; splits <= cujit::kMaxDecodeClusterSplits; ++splits) {
    SCOPED_TRACE(splits);
    const AttnPlan plan = plan_for(long_decode(splits), target("sm_90a"));
    EXPECT_EQ(plan.key_splits, splits);
    ASSERT_EQ(plan.step_count, 1) << "no combine pass";
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_EQ(plan.steps[0].geometry.cluster_x, unsigned(splits));
    EXPECT_EQ(plan.steps[0].geometry.grid.x % unsigned(splits), 0u) << "a cluster is one row block's splits";
  }
}

TEST(DecodePlan, MoreSplitsThanAClusterHoldsAndOlderGpusUseTheCombinePass) {
  const AttnPlan many = plan_for(long_decode(cujit::kMaxDecodeClusterSplits + 1), target("sm_90a"));
  EXPECT_EQ(many.key_splits, cujit::kMaxDecodeClusterSplits + 1);
  EXPECT_EQ(many.step_count, 2);
  EXPECT_GT(many.workspace_bytes, 0u);
  EXPECT_EQ(many.steps[0].geometry.cluster_x, 1u);
  for (const char* arch : {"sm_89", "sm_80"}) {
    SCOPED_TRACE(arch);
    const AttnPlan plan = plan_for(long_decode(4), target(arch));
    EXPECT_EQ(plan.key_splits, 4);
    EXPECT_EQ(plan.step_count, 2);
    EXPECT_GT(plan.workspace_bytes, 0u);
    EXPECT_EQ(plan.steps[0].geometry.cluster_x, 1u);
  }
}

TEST(DecodePlan, SixtyFourPackedRowsAndHeadDim256KeepTheCombinePass) {
  AttnProblem rows64 = long_decode(2);
  rows64.heads_q = 64;
  rows64.heads_kv = 1;  // 64 packed rows: BM = 64
  AttnProblem d256 = long_decode(2);
  d256.head_dim = 256;
  for (const AttnProblem& p : {rows64, d256}) {
    const AttnPlan plan = plan_for(p, target("sm_90a"));
    EXPECT_EQ(plan.key_splits, 2);
    EXPECT_EQ(plan.step_count, 2) << "head dim " << p.head_dim << ", " << p.heads_q << " query heads";
    EXPECT_EQ(plan.steps[0].geometry.cluster_x, 1u);
  }
}

// Warpgroup-MMA configs (attn_decode.cu, WG): sm_90a and a 16-bit cache,
// blocks of 64 packed rows (MQA at 64 query heads), 64 or 128 keys a
// warpgroup, at least 3 stages; with room to align the swizzle atoms, never
// merged in a cluster.
TEST(DecodePlan, WarpgroupMmaConfigsTakeBlocksOfSixtyFourRowsOnSm90aOnly) {
  const auto& decode = jit::detail::decode_attention_family();
  AttnProblem mqa = long_decode(0);
  mqa.batch = 4;
  mqa.heads_q = 64;
  mqa.heads_kv = 1;  // 64 packed rows
  mqa.page_size = 0;
  const jit::Json spec = decode.spec_for(mqa);
  ASSERT_EQ(spec.at("bm").get<int>(), 64);
  const jit::Json wg = {{"bn", 64}, {"stages", 4}, {"warps", 4}, {"wg", true}};
  const jit::Json mma = {{"bn", 64}, {"stages", 4}, {"warps", 4}};
  const jit::Target sm90 = target("sm_90a");
  EXPECT_EQ(decode.why_pruned(spec, wg, sm90), std::nullopt);
  EXPECT_EQ(decode.variant_name(spec, wg), "attn_decode_d128_bf16_causal_bm64_bn64_st4_w4_wg");
  EXPECT_EQ(decode.name_expression(spec, wg),
            "cujit::decode::attn_decode<128, 64, 64, 4, 4, cujit::bf16, cujit::bf16, true, false, false, false, true>");
  EXPECT_EQ(decode.variant_name(spec, mma), "attn_decode_d128_bf16_causal_bm64_bn64_st4_w4");
  EXPECT_FALSE(mma.contains("wg")) << "the other configs' records stay as they were";

  const AttnPlan with = decode.plan(mqa, wg, sm90);
  const AttnPlan without = decode.plan(mqa, mma, sm90);
  EXPECT_EQ(with.steps[0].geometry.grid.x, without.steps[0].geometry.grid.x);
  EXPECT_EQ(with.key_splits, without.key_splits);
  EXPECT_EQ(with.steps[0].geometry.block.x, 128u);
  EXPECT_EQ(with.steps[0].geometry.cluster_x, 1u);
  EXPECT_EQ(with.steps[0].geometry.smem_bytes, without.steps[0].geometry.smem_bytes + unsigned(cujit::kDecodeWgAlign));

  // Where they do not apply.
  EXPECT_TRUE(decode.why_pruned(spec, wg, target("sm_89")).has_value());
  EXPECT_TRUE(decode.why_pruned(spec, {{"bn", 64}, {"stages", 4}, {"warps", 8}, {"wg", true}}, sm90).has_value())
      << "32 keys a warpgroup";
  EXPECT_TRUE(decode.why_pruned(spec, {{"bn", 64}, {"stages", 2}, {"warps", 4}, {"wg", true}}, sm90).has_value())
      << "no stage for the last block's P V";
  EXPECT_EQ(decode.why_pruned(spec, {{"bn", 128}, {"stages", 3}, {"warps", 8}, {"wg", true}}, sm90), std::nullopt);
  AttnProblem fp8 = mqa;
  fp8.fp8_kv = true;
  EXPECT_TRUE(decode.why_pruned(decode.spec_for(fp8), wg, sm90).has_value());
  AttnProblem rows32 = mqa;
  rows32.heads_q = 32;
  EXPECT_TRUE(decode.why_pruned(decode.spec_for(rows32), wg, sm90).has_value()) << "32 rows padded to 64";
  AttnProblem d256 = mqa;
  d256.head_dim = 256;
  EXPECT_TRUE(decode.why_pruned(decode.spec_for(d256), wg, sm90).has_value());
}

TEST(DecodePlan, OneSplitIsOneLaunchWithoutClusters) {
  for (const char* arch : {"sm_90a", "sm_89"}) {
    SCOPED_TRACE(arch);
    const AttnPlan plan = plan_for(long_decode(1), target(arch));
    EXPECT_EQ(plan.key_splits, 1);
    EXPECT_EQ(plan.step_count, 1);
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_EQ(plan.steps[0].geometry.cluster_x, 1u);
  }
}

// Blocks of 8 rows over an FP8 cache merge by pushing their parts into the
// merging CTA, which waits for their bytes on an mbarrier of its own
// (cluster_merge.cuh). It lives from the kernel's start to its end, so its 8
// bytes come after the K/V ring and the merge's regions, aligned; the pulled
// merge (16-bit caches, more rows) and the combine pass keep no room for it.
TEST(DecodeLayout, ThePushedPartsBarrierFollowsEveryRegion) {
  for (int d : {64, 128})
    for (int bn : {32, 64, 128})
      for (int stages : {2, 3, 8})
        for (int warps : {2, 4, 8})
          for (bool paged : {false, true})
            for (int factor_heads : {0, 1, 2}) {
              SCOPED_TRACE(::testing::Message() << "d " << d << " bn " << bn << " stages " << stages << " warps "
                                                << warps << " paged " << paged << " factor heads " << factor_heads);
              const int bar = cujit::decode_parts_barrier_offset(d, 8, bn, stages, warps, paged, 1, factor_heads);
              EXPECT_EQ(bar % 8, 0);
              EXPECT_GE(bar, cujit::decode_stream_bytes(d, 8, bn, stages, paged, 1, factor_heads));
              EXPECT_GE(bar, cujit::decode_merge_bytes(d, 8, warps) + cujit::decode_cluster_part_bytes(d, 8));
              EXPECT_EQ(cujit::decode_smem_bytes(d, 8, bn, stages, warps, paged, 1, true, factor_heads), bar + 8);
              EXPECT_EQ(cujit::decode_smem_bytes(d, 8, bn, stages, warps, paged, 1, false, factor_heads),
                        cujit::decode_regions_bytes(d, 8, bn, stages, warps, paged, 1, false, factor_heads))
                  << "no cluster merge: no barrier";
              for (int bm : {8, 16, 32}) {
                EXPECT_EQ(cujit::decode_smem_bytes(d, bm, bn, stages, warps, paged, 2, true, 0),
                          cujit::decode_regions_bytes(d, bm, bn, stages, warps, paged, 2, true, 0))
                    << "16-bit caches pull: no barrier";
              }
              EXPECT_EQ(cujit::decode_smem_bytes(d, 16, bn, stages, warps, paged, 1, true, factor_heads),
                        cujit::decode_regions_bytes(d, 16, bn, stages, warps, paged, 1, true, factor_heads))
                  << "16 FP8 rows pull: no barrier";
            }
}

// The kernel's static_assert: a paged variant takes at most
// kMaxPagedLoadPasses load passes per block (more spill, each holding its
// key's page lookup). The host prunes exactly those.
TEST(DecodePruning, PagedVariantsKeepAtMostSixteenLoadPasses) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = target("sm_90a");
  int kept_paged = 0;
  for (int head_dim : {64, 128, 256})
    for (bool paged : {false, true}) {
      AttnProblem p = long_decode(0);
      p.heads_q = 16;  // two query heads per KV head: a block of 8 rows
      p.head_dim = head_dim;
      p.page_size = paged ? 16 : 0;
      const jit::Json spec = decode.spec_for(p);
      for (const jit::Json& config : decode.config_space(spec)) {
        // A thread loads one 16-byte column of a row per pass.
        const int rows_per_pass = config.at("warps").get<int>() * 32 / (head_dim * 2 / 16);
        const int passes = config.at("bn").get<int>() / rows_per_pass;
        const std::optional<std::string> why = decode.why_pruned(spec, config, sm90);
        SCOPED_TRACE(decode.variant_name(spec, config));
        if (paged && passes > cujit::kMaxPagedLoadPasses) {
          EXPECT_TRUE(why.has_value()) << passes << " passes";
        }
        if (!paged && why) {
          EXPECT_EQ(why->find("load passes"), std::string::npos) << *why;
        }
        kept_paged += paged && !why;
      }
    }
  EXPECT_GT(kept_paged, 0);
  // Head dim 256 at two warps and 64 keys: 32 passes, kept contiguous only.
  AttnProblem d256 = long_decode(0);
  d256.heads_q = 16;
  d256.head_dim = 256;
  const jit::Json config = {{"bn", 64}, {"stages", 2}, {"warps", 2}};
  const std::optional<std::string> why = decode.why_pruned(decode.spec_for(d256), config, sm90);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("32 load passes"), std::string::npos) << *why;
  d256.page_size = 0;
  EXPECT_FALSE(decode.why_pruned(decode.spec_for(d256), config, sm90).has_value());
}

// An FP8 cache at head dim 64 with at most 4 packed rows per KV head and an
// even number of KV heads: two KV heads a CTA (half the grid's heads), the
// tile of head dim 128; everything else one.
TEST(DecodePlan, PairsKvHeadsOfFp8CachesAtHeadDim64WithFewRows) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = target("sm_90a");
  AttnProblem p = long_decode(1);
  p.heads_q = 16;
  p.heads_kv = 4;
  p.head_dim = 64;
  p.fp8_kv = true;
  const jit::Json spec = decode.spec_for(p);
  EXPECT_EQ(spec.value("kv_heads", 1), 2);
  const jit::Json config = decode.default_config(spec, sm90);
  EXPECT_NE(decode.variant_name(spec, config).find("_kvheads2_"), std::string::npos);
  EXPECT_NE(decode.name_expression(spec, config).find("attn_decode<128, 8,"), std::string::npos)
      << decode.name_expression(spec, config);
  const AttnPlan plan = decode.plan(p, config, sm90);
  EXPECT_EQ(plan.steps[0].geometry.grid.y, 2u);
  EXPECT_EQ(plan.steps[0].geometry.grid.x, 1u);

  auto paired = [&](const AttnProblem& q) { return decode.spec_for(q).paired_kv_heads; };
  AttnProblem gqa1_rows3 = p;
  gqa1_rows3.heads_q = 4;
  gqa1_rows3.seq_q = 3;
  EXPECT_TRUE(paired(gqa1_rows3));
  AttnProblem five_rows = p;
  five_rows.heads_q = 4;
  five_rows.seq_q = 5;
  EXPECT_FALSE(paired(five_rows)) << "10 rows do not fit a block of 8";
  AttnProblem odd_heads = p;
  odd_heads.heads_kv = 3;
  odd_heads.heads_q = 12;
  EXPECT_FALSE(paired(odd_heads));
  AttnProblem f16_cache = p;
  f16_cache.fp8_kv = false;
  EXPECT_FALSE(paired(f16_cache));
  AttnProblem d128 = p;
  d128.head_dim = 128;
  EXPECT_FALSE(paired(d128));
  AttnProblem head_major = p;
  head_major.kv_token_major = false;
  EXPECT_FALSE(paired(head_major)) << "a head-major cache keeps one KV head a CTA";
}

// The configs sm_90a's ptxas spills over a contiguous 16-bit cache leave
// the space there, with a reason that says so; the same configs paged (over
// pages whose size the kernel reads: 7 keys), or on sm_89, are not left out
// for it.
TEST(DecodePlan, LeavesOutTheConfigsPtxasSpillsOnSm90) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = target("sm_90a"), sm89 = target("sm_89");
  struct Listed {
    int head_dim;
    bool causal;
    int block_m, bn, stages, warps;
  };
  const Listed listed[] = {{64, false, 8, 64, 3, 2},  {64, true, 16, 128, 2, 4}, {128, true, 32, 32, 6, 4},
                           {128, true, 32, 64, 6, 2}, {256, false, 32, 32, 4, 4}, {256, true, 32, 64, 2, 8}};
  for (const Listed& x : listed)
    for (const jit::DType dtype : {jit::DType::f16, jit::DType::bf16}) {
      AttnProblem p = long_decode(0);
      p.page_size = 0;
      p.dtype = dtype;
      p.head_dim = x.head_dim;
      p.causal = x.causal;
      p.heads_kv = 1;
      p.heads_q = x.block_m == 8 ? 4 : x.block_m;  // one new row: the packed rows are the group
      const jit::Json spec = decode.spec_for(p);
      ASSERT_EQ(spec.at("bm").get<int>(), x.block_m);
      const jit::Json config = {{"bn", x.bn}, {"stages", x.stages}, {"warps", x.warps}};
      SCOPED_TRACE(decode.variant_name(spec, config));
      const std::optional<std::string> why = decode.why_pruned(spec, config, sm90);
      ASSERT_TRUE(why.has_value());
      EXPECT_NE(why->find("ptxas spills this config on sm_90a"), std::string::npos) << *why;
      const std::optional<std::string> why89 = decode.why_pruned(spec, config, sm89);
      EXPECT_TRUE(!why89 || why89->find("ptxas spills") == std::string::npos) << *why89;
      p.page_size = 7;
      const std::optional<std::string> paged = decode.why_pruned(decode.spec_for(p), config, sm90);
      EXPECT_TRUE(!paged || paged->find("ptxas spills") == std::string::npos) << *paged;
    }
  // A neighbour one stage apart stays.
  AttnProblem p = long_decode(0);
  p.page_size = 0;
  p.head_dim = 64;
  p.causal = false;
  p.heads_kv = 1;
  p.heads_q = 4;
  const jit::Json neighbour = {{"bn", 64}, {"stages", 4}, {"warps", 2}};
  EXPECT_FALSE(decode.why_pruned(decode.spec_for(p), neighbour, sm90).has_value());
}

}  // namespace

// Descale factors per page: a variant of its own (the kernel's PAGE_DESCALE),
// whose ring holds each stage's factors, for paged FP8 caches only.
TEST(DecodePlan, FactorsPerPageTakeAVariantWithTheirRoomInTheRing) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = target("sm_90a");
  AttnProblem p = long_decode(1);
  p.fp8_kv = true;
  const jit::Json per_sequence = decode.spec_for(p);
  p.descale_per_page = true;
  const jit::Json spec = decode.spec_for(p);
  EXPECT_EQ(spec.value("kv_scale", ""), "page");
  EXPECT_TRUE(decode.spec_for(p).page_descale);
  EXPECT_TRUE(spec.get<jit::detail::AttnSpec>().page_descale) << "the JSON reads back";
  EXPECT_FALSE(per_sequence.contains("kv_scale"));
  const jit::Json config = decode.default_config(spec, sm90);
  EXPECT_NE(decode.variant_name(spec, config).find("_paged16_pagescale_"), std::string::npos)
      << decode.variant_name(spec, config);
  const std::string expression = decode.name_expression(spec, config);
  EXPECT_EQ(expression.substr(expression.size() - 18), ", true, false, 16>") << expression;
  EXPECT_EQ(decode.name_expression(per_sequence, config).find(", false, false, false, 16>") + 26,
            decode.name_expression(per_sequence, config).size());
  const AttnPlan with = decode.plan(p, config, sm90);
  p.descale_per_page = false;
  const AttnPlan without = decode.plan(p, config, sm90);
  const int bn = config.at("bn").get<int>(), stages = config.at("stages").get<int>();
  EXPECT_EQ(with.steps[0].geometry.smem_bytes, without.steps[0].geometry.smem_bytes + unsigned(stages * 2 * bn * 4))
      << "each stage's K and V factors, one KV head";

  // The configs sm_90a's ptxas spills with factors per page (32 rows, 64-key
  // blocks, two warps: causal at three and six stages, non-causal at three)
  // leave the space there, and only with them.
  struct Spilling {
    bool causal;
    int stages;
  };
  for (const Spilling spilling : {Spilling{true, 3}, Spilling{true, 6}, Spilling{false, 3}}) {
    AttnProblem rows32 = p;
    rows32.heads_q = 32;
    rows32.heads_kv = 1;
    rows32.dtype = jit::DType::f16;
    rows32.causal = spilling.causal;
    rows32.descale_per_page = true;
    const jit::Json config = {{"bn", 64}, {"stages", spilling.stages}, {"warps", 2}};
    const std::optional<std::string> why = decode.why_pruned(decode.spec_for(rows32), config, sm90);
    ASSERT_TRUE(why.has_value()) << "causal " << spilling.causal << ", " << spilling.stages << " stages";
    EXPECT_NE(why->find("ptxas spills"), std::string::npos) << *why;
    rows32.descale_per_page = false;
    const std::optional<std::string> per_sequence_why = decode.why_pruned(decode.spec_for(rows32), config, sm90);
    EXPECT_FALSE(per_sequence_why.has_value()) << *per_sequence_why;
  }

  // Only paged FP8 variants carry it.
  jit::detail::AttnSpec odd = spec.get<jit::detail::AttnSpec>();
  odd.paged = false;
  EXPECT_TRUE(decode.why_pruned(jit::Json(odd), config, sm90).has_value());
  odd = spec.get<jit::detail::AttnSpec>();
  odd.fp8_kv = false;
  EXPECT_TRUE(decode.why_pruned(jit::Json(odd), config, sm90).has_value());
}

// Pages of a power of two of at least 8 keys: the variant is compiled for the
// page size (its loads step through a page); other sizes share one variant
// that reads it from the parameters, and contiguous caches have none.
TEST(DecodePlan, PowerOfTwoPagesOfEightKeysOrMoreCompileTheirPageSize) {
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = target("sm_90a");
  AttnProblem p = long_decode(0);
  for (const std::int64_t page : {8, 16, 64, 256}) {
    p.page_size = page;
    const jit::Json spec = decode.spec_for(p);
    EXPECT_EQ(spec.value("page", 0), page);
    EXPECT_EQ(spec.get<jit::detail::AttnSpec>().page_size, page) << "the JSON reads back";
    const jit::Json config = decode.default_config(spec, sm90);
    const std::string name = decode.variant_name(spec, config);
    EXPECT_NE(name.find(fmt::format("_paged{}_", page)), std::string::npos) << name;
    const std::string expression = decode.name_expression(spec, config);
    EXPECT_TRUE(expression.ends_with(fmt::format(", false, false, {}>", page))) << expression;
  }
  for (const std::int64_t page : {1, 2, 4, 7, 24, 0}) {
    p.page_size = page;
    const jit::Json spec = decode.spec_for(p);
    EXPECT_FALSE(spec.contains("page")) << "page size " << page;
    const jit::Json config = decode.default_config(spec, sm90);
    const std::string name = decode.variant_name(spec, config);
    EXPECT_NE(name.find(page > 0 ? "_paged_" : "_causal_bm"), std::string::npos) << name;
    const std::string expression = decode.name_expression(spec, config);
    EXPECT_TRUE(expression.ends_with(", false, false, false>")) << expression;
  }
  // The 16-bit configs ptxas spills with a compiled page size leave the
  // space on sm_90a; the same config over pages of 7 keys stays.
  AttnProblem rows32 = long_decode(0);
  rows32.heads_kv = 1;
  rows32.page_size = 16;
  const jit::Json spilling = {{"bn", 64}, {"stages", 3}, {"warps", 2}};
  const std::optional<std::string> why = decode.why_pruned(decode.spec_for(rows32), spilling, sm90);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("ptxas spills"), std::string::npos) << *why;
  rows32.page_size = 7;
  const std::optional<std::string> generic_why = decode.why_pruned(decode.spec_for(rows32), spilling, sm90);
  EXPECT_FALSE(generic_why.has_value()) << *generic_why;

  // Only paged variants carry one.
  p.page_size = 16;
  jit::detail::AttnSpec odd = decode.spec_for(p);
  odd.paged = false;
  EXPECT_TRUE(decode.why_pruned(jit::Json(odd), decode.default_config(decode.spec_for(p), sm90), sm90).has_value());
}
