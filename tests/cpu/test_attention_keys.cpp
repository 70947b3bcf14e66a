// Tests for what keys an attention call: the hot path's shape key (every
// field of the problem, the causal alignment included), the typed spec's JSON
// form (what tune keys, cubin keys and records hold), and plans that depend
// on the alignment. No GPU (offline targets).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

#include "jit/attention/families.h"
#include "jit/attention/shape_key.h"
#include "jit/attention/sm90/tile_order.h"
#include "jit/error.h"

namespace {

using jit::detail::AttnProblem;

AttnProblem problem() {
  AttnProblem p;
  p.batch = 2;
  p.heads_q = 8;
  p.heads_kv = 4;
  p.seq_q = 512;
  p.seq_k = 1024;
  p.head_dim = 128;
  p.dtype = jit::DType::f16;
  p.causal = true;
  p.causal_offset = 0;
  p.scale = 0.125f;
  return p;
}

// Each edit changes one field of a problem.
const std::vector<std::function<void(AttnProblem&)>> kOneFieldEdits = {
    [](AttnProblem& p) { p.batch = 3; },          [](AttnProblem& p) { p.heads_q = 16; },
    [](AttnProblem& p) { p.heads_kv = 8; },       [](AttnProblem& p) { p.seq_q = 513; },
    [](AttnProblem& p) { p.seq_k = 1025; },       [](AttnProblem& p) { p.head_dim = 64; },
    [](AttnProblem& p) { p.dtype = jit::DType::bf16; }, [](AttnProblem& p) { p.causal = false; },
    [](AttnProblem& p) { p.causal_offset = 512; }, [](AttnProblem& p) { p.scale = 0.25f; },
    [](AttnProblem& p) { p.page_size = 16; },      [](AttnProblem& p) { p.seq_lens = true; },
    [](AttnProblem& p) { p.num_splits = 1; },      [](AttnProblem& p) { p.fp8_kv = true; },
    [](AttnProblem& p) { p.fp8_qkv = true; },      [](AttnProblem& p) { p.fp8_format = jit::DType::e5m2; },
    [](AttnProblem& p) { p.varlen = true; },
    [](AttnProblem& p) { p.total_q = 4096; },      [](AttnProblem& p) { p.total_k = 4096; },
    [](AttnProblem& p) { p.align_bottom_right = true; }, [](AttnProblem& p) { p.kv_token_major = false; },
    [](AttnProblem& p) { p.descale_per_page = true; },
};

TEST(ShapeKey, EveryFieldOfTheProblemTellsKeysApart) {
  const jit::detail::ShapeKeyHash hash;
  const jit::detail::ShapeKey base{nullptr, problem()};
  EXPECT_EQ(base, (jit::detail::ShapeKey{nullptr, problem()}));
  EXPECT_EQ(hash(base), hash(jit::detail::ShapeKey{nullptr, problem()}));
  for (std::size_t i = 0; i < kOneFieldEdits.size(); ++i) {
    jit::detail::ShapeKey other = base;
    kOneFieldEdits[i](other.problem);
    EXPECT_FALSE(other == base) << "edit " << i << " left the key equal";
    EXPECT_NE(hash(other), hash(base)) << "edit " << i << " left the hash equal";
  }
  // One edit per field: a field added to AttnProblem needs an edit here.
  EXPECT_EQ(std::tuple_size_v<decltype(problem().fields())>, kOneFieldEdits.size());
}

TEST(ShapeKey, TopLeftAndBottomRightOfOneShapeAreDifferentKeys) {
  AttnProblem top_left = problem();
  AttnProblem bottom_right = problem();
  bottom_right.causal_offset = int(bottom_right.seq_k - bottom_right.seq_q);
  EXPECT_FALSE((jit::detail::ShapeKey{nullptr, top_left}) == (jit::detail::ShapeKey{nullptr, bottom_right}));
}

// The sm90 plan reads the alignment: some shape's tile order differs between
// the two alignments on an H100-sized grid, and then so do the plans (which
// is why the key must tell them apart).
TEST(Sm90Plan, DependsOnTheCausalAlignment) {
  if (std::getenv("CUJIT_SM90_TILE_ORDER") != nullptr) GTEST_SKIP() << "CUJIT_SM90_TILE_ORDER forces one order";
  jit::Target hopper = jit::offline_target("sm_90a");
  hopper.sm_count = 132;
  const jit::Json config = {{"bm", 128}, {"bn", 128}, {"stages", 2}};
  const auto& family = jit::detail::sm90_attention_family();
  std::optional<std::pair<AttnProblem, AttnProblem>> found;
  for (std::int64_t heads : {1, 2, 4, 8, 16}) {
    for (std::int64_t seq_q : {1024, 2048, 4096, 8192, 16384}) {
      for (std::int64_t seq_k : {seq_q / 4, seq_q / 2, seq_q * 2, seq_q * 4}) {
        AttnProblem top_left = problem();
        top_left.batch = 1;
        top_left.heads_q = top_left.heads_kv = heads;
        top_left.seq_q = seq_q;
        top_left.seq_k = seq_k;
        AttnProblem bottom_right = top_left;
        bottom_right.causal_offset = int(seq_k - seq_q);
        const int ctas = int(std::min<std::int64_t>(132, (seq_q + 127) / 128 * heads));
        if (jit::detail::tile_group_heads(top_left, 128, 128, ctas) !=
            jit::detail::tile_group_heads(bottom_right, 128, 128, ctas)) {
          found = {top_left, bottom_right};
          break;
        }
      }
      if (found) break;
    }
    if (found) break;
  }
  ASSERT_TRUE(found) << "no shape's tile order depends on the alignment: pick shapes that do";
  const jit::detail::AttnPlan a = family.plan(found->first, config, hopper);
  const jit::detail::AttnPlan b = family.plan(found->second, config, hopper);
  ASSERT_EQ(a.step_count, 1);
  ASSERT_EQ(b.step_count, 1);
  EXPECT_FALSE(a.steps[0].data == b.steps[0].data) << "Sq " << found->first.seq_q << ", Sk " << found->first.seq_k;
}

TEST(Plans, TakeTheTargetTheyAreGiven) {
  AttnProblem p = problem();
  p.seq_q = p.seq_k = 16384;
  const jit::Json config = {{"bm", 128}, {"bn", 128}, {"stages", 2}};
  jit::Target hopper = jit::offline_target("sm_90a");
  hopper.sm_count = 132;
  const auto& sm90 = jit::detail::sm90_attention_family();
  EXPECT_EQ(sm90.plan(p, config, hopper).steps[0].geometry.grid.x, 132u);  // persistent: one CTA per SM
  hopper.sm_count = 0;                                                     // offline: one CTA per tile
  EXPECT_EQ(sm90.plan(p, config, hopper).steps[0].geometry.grid.x, unsigned(16384 / 128 * 2 * 8));
  // Today's forward is one launch with no workspace.
  EXPECT_EQ(sm90.plan(p, config, hopper).workspace_bytes, 0u);
  const jit::Json portable_config = {{"bm", 128}, {"bn", 64}, {"stages", 2}, {"warps", 8}};
  const jit::detail::AttnPlan portable =
      jit::detail::portable_attention_family().plan(p, portable_config, jit::offline_target("sm_89"));
  EXPECT_EQ(portable.step_count, 1);
  EXPECT_EQ(portable.steps[0].geometry.grid.x, 16384u / 128);
  EXPECT_EQ(portable.steps[0].geometry.smem_bytes, unsigned((128 + 2 * 2 * 64) * 128 * 2));
}

TEST(AttnSpec, JsonFormIsTheOneKeysAndRecordsHold) {
  const jit::detail::AttnSpec spec{jit::DType::bf16, 128, true};
  const jit::Json json = spec;
  EXPECT_EQ(json, (jit::Json{{"dtype", "bf16"}, {"d", 128}, {"causal", true}}));
  EXPECT_EQ(json.get<jit::detail::AttnSpec>(), spec);
  EXPECT_EQ(jit::detail::spec_of(problem()), (jit::detail::AttnSpec{jit::DType::f16, 128, true}));
}

TEST(AttnSpec, AnFp8CacheIsKeyedApart) {
  jit::detail::AttnSpec spec{jit::DType::f16, 128, true};
  spec.paged = true;
  spec.block_m = 16;
  spec.fp8_kv = true;
  const jit::Json json = spec;
  EXPECT_EQ(json.at("kv"), "e4m3");
  EXPECT_EQ(json.get<jit::detail::AttnSpec>(), spec);
  spec.fp8_kv = false;
  EXPECT_FALSE(jit::Json(spec).contains("kv"));  // 16-bit caches keep their keys and records
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Json fp8 = {{"dtype", "bf16"}, {"d", 128}, {"causal", true}, {"paged", true}, {"bm", 16}, {"kv", "e4m3"}};
  const jit::Json config = decode.default_config(fp8, jit::offline_target("sm_90a"));
  EXPECT_EQ(decode.variant_name(fp8, config), "attn_decode_d128_bf16_kve4m3_causal_paged_bm16_bn128_st3_w4");
  EXPECT_EQ(decode.name_expression(fp8, config),
            "cujit::decode::attn_decode<128, 16, 128, 3, 4, cujit::bf16, cujit::e4m3, true, true, false, false, false>");
  EXPECT_TRUE(decode.why_pruned(fp8, config, jit::offline_target("sm_80")).has_value()) << "e4m3 needs sm_89";
  jit::Json d256 = fp8;
  d256["d"] = 256;
  EXPECT_TRUE(decode.why_pruned(d256, config, jit::offline_target("sm_90a")).has_value());
}

TEST(AttnSpec, AnE5m2CacheIsKeyedApartFromE4m3) {
  jit::detail::AttnSpec spec{jit::DType::bf16, 128, true};
  spec.paged = true;
  spec.block_m = 16;
  spec.fp8_kv = true;
  spec.fp8_format = jit::DType::e5m2;
  const jit::Json json = spec;
  EXPECT_EQ(json.at("kv"), "e5m2");
  EXPECT_EQ(json.get<jit::detail::AttnSpec>(), spec);
  jit::detail::AttnSpec e4m3 = spec;
  e4m3.fp8_format = jit::DType::e4m3;
  EXPECT_NE(jit::Json(e4m3), json);
  const auto& decode = jit::detail::decode_attention_family();
  const jit::Json config = decode.default_config(json, jit::offline_target("sm_90a"));
  EXPECT_EQ(decode.variant_name(json, config), "attn_decode_d128_bf16_kve5m2_causal_paged_bm16_bn128_st3_w4");
  EXPECT_EQ(decode.name_expression(json, config),
            "cujit::decode::attn_decode<128, 16, 128, 3, 4, cujit::bf16, cujit::e5m2, true, true, false, false, false>");
  // A byte permute, not an FP8 instruction: sm_80 has the kernel.
  EXPECT_FALSE(decode.why_pruned(json, config, jit::offline_target("sm_80")).has_value());
  jit::Json unknown = json;
  unknown["kv"] = "e3m4";
  EXPECT_THROW(unknown.get<jit::detail::AttnSpec>(), jit::Error);
}

TEST(TypedFamilies, VariantNamesAndExpressionsAreUnchanged) {
  const jit::Json spec = {{"dtype", "bf16"}, {"d", 128}, {"causal", true}};
  const auto& sm90 = jit::detail::sm90_attention_family();
  const jit::Json sm90_config = sm90.default_config(spec, jit::offline_target("sm_90a"));
  EXPECT_EQ(sm90_config, (jit::Json{{"bm", 128}, {"bn", 128}, {"stages", 2}}));
  EXPECT_EQ(sm90.variant_name(spec, sm90_config), "attn_fwd_sm90_d128_bf16_causal_bm128_bn128_st2");
  EXPECT_EQ(sm90.name_expression(spec, sm90_config), "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::bf16, true, false, cujit::bf16, false>");
  const auto& portable = jit::detail::portable_attention_family();
  const jit::Json portable_config = portable.default_config(spec, jit::offline_target("sm_89"));
  EXPECT_EQ(portable_config, (jit::Json{{"bm", 128}, {"bn", 64}, {"stages", 2}, {"warps", 8}}));
  EXPECT_EQ(portable.variant_name(spec, portable_config), "attn_fwd_portable_d128_bf16_causal_bm128_bn64_st2_w8");
  EXPECT_EQ(portable.name_expression(spec, portable_config),
            "cujit::portable::attn_fwd_portable<128, 128, 64, 2, 8, cujit::bf16, true, false, cujit::bf16>");
  // A ragged batch's variant: the same config, the VARLEN argument set.
  jit::Json varlen = spec;
  varlen["varlen"] = true;
  EXPECT_EQ(sm90.variant_name(varlen, sm90_config), "attn_fwd_sm90_d128_bf16_causal_varlen_bm128_bn128_st2");
  EXPECT_EQ(sm90.name_expression(varlen, sm90_config),
            "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::bf16, true, true, cujit::bf16, false>");
  EXPECT_EQ(portable.name_expression(varlen, portable_config),
            "cujit::portable::attn_fwd_portable<128, 128, 64, 2, 8, cujit::bf16, true, true, cujit::bf16>");
  // FP8 inputs: their own variants, the input type last.
  jit::Json fp8 = spec;
  fp8["qkv"] = "e4m3";
  EXPECT_EQ(sm90.variant_name(fp8, sm90_config), "attn_fwd_sm90_d128_e4m3_to_bf16_causal_bm128_bn128_st2");
  EXPECT_EQ(sm90.name_expression(fp8, sm90_config),
            "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::bf16, true, false, cujit::e4m3, false>");
  EXPECT_EQ(portable.name_expression(fp8, portable_config),
            "cujit::portable::attn_fwd_portable<128, 128, 64, 2, 8, cujit::bf16, true, false, cujit::e4m3>");
  EXPECT_EQ(sm90.config_space(spec).size(), 36u);
  EXPECT_EQ(portable.config_space(spec).size(), 24u);
}

// FP8 V staged transposed ahead of the kernel: configs of their own (the
// field written only when set, so older records read as before), their own
// variants, dense batches only, and the staging pass as the spec's companion.
TEST(TypedFamilies, StagedVConfigsAreDenseFp8Only) {
  const auto& sm90 = jit::detail::sm90_attention_family();
  const jit::Target target = jit::offline_target("sm_90a");
  jit::Json fp8 = {{"dtype", "bf16"}, {"d", 128}, {"causal", false}, {"qkv", "e4m3"}};
  const jit::Json staged = {{"bm", 128}, {"bn", 224}, {"stages", 2}, {"vt_staged", true}};
  const jit::Json in_kernel = {{"bm", 128}, {"bn", 224}, {"stages", 2}};
  const std::vector<jit::Json> space = sm90.config_space(fp8);
  EXPECT_NE(std::ranges::find(space, staged), space.end());
  EXPECT_NE(std::ranges::find(space, in_kernel), space.end());
  EXPECT_EQ(std::ranges::count_if(space, [](const jit::Json& c) { return c.value("vt_staged", false); }) * 2,
            std::int64_t(space.size()));
  EXPECT_EQ(sm90.variant_name(fp8, staged), "attn_fwd_sm90_d128_e4m3_to_bf16_bm128_bn224_st2_vstaged");
  EXPECT_EQ(sm90.name_expression(fp8, staged),
            "cujit::sm90::attn_fwd_sm90<128, 128, 224, 2, cujit::bf16, false, false, cujit::e4m3, true>");
  EXPECT_FALSE(sm90.why_pruned(fp8, staged, target).has_value());
  const std::optional<std::string> why_bm192 =
      sm90.why_pruned(fp8, {{"bm", 192}, {"bn", 96}, {"stages", 2}, {"vt_staged", true}}, target);
  ASSERT_TRUE(why_bm192.has_value());
  EXPECT_NE(why_bm192->find("BM = 128"), std::string::npos) << *why_bm192;
  EXPECT_FALSE(sm90.why_pruned(fp8, {{"bm", 192}, {"bn", 96}, {"stages", 2}}, target).has_value());
  const std::vector<jit::detail::AttentionFamily::Companion> companions = sm90.companions(fp8);
  ASSERT_EQ(companions.size(), 1u);
  EXPECT_EQ(companions[0].family->variant_name(companions[0].spec, companions[0].config), "attn_v_stage_d128");

  jit::Json ragged = fp8;
  ragged["varlen"] = true;
  EXPECT_TRUE(sm90.why_pruned(ragged, staged, target).has_value());
  for (const jit::Json& c : sm90.config_space(ragged)) EXPECT_FALSE(c.value("vt_staged", false));
  jit::Json bf16 = fp8;
  bf16.erase("qkv");
  EXPECT_TRUE(sm90.why_pruned(bf16, staged, target).has_value());
  EXPECT_TRUE(sm90.companions(bf16).empty());
}

}  // namespace
