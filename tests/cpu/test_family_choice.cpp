// Which attention family serves a problem on a target (CUJIT_FAMILY unset):
// sm90 on sm_90a for every head dim it has, portable elsewhere, and a clear
// Unsupported error where none fits. No GPU needed (offline targets).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "jit/attention/families.h"
#include "jit/error.h"

namespace {

jit::detail::AttnProblem problem(std::int64_t head_dim) {
  jit::detail::AttnProblem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 2;
  p.seq_q = p.seq_k = 128;
  p.head_dim = head_dim;
  return p;
}

class FamilyChoice : public testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set; these cases are for auto";
  }
};

TEST_F(FamilyChoice, HopperGetsTheSm90FamilyForEveryHeadDimItHas) {
  const jit::Target hopper = jit::offline_target("sm_90a");
  for (int d : {64, 128, 256}) {
    EXPECT_EQ(jit::detail::attention_family_for(problem(d), hopper).name(), "attn_fwd_sm90") << "d" << d;
  }
}

TEST_F(FamilyChoice, OtherArchsGetThePortableFamily) {
  for (const char* arch : {"sm_89", "sm_80"}) {
    for (int d : {64, 128}) {
      EXPECT_EQ(jit::detail::attention_family_for(problem(d), jit::offline_target(arch)).name(), "attn_fwd_portable")
          << arch << " d" << d;
    }
  }
}

// FP8 inputs (q, k, v in e4m3), from any number of query rows (the decode
// family's q is 16-bit): sm90 on Hopper at D = 128 (its only FP8 head dim),
// portable at D = 64 and on Ada.
TEST_F(FamilyChoice, Fp8InputsGetSm90AtHeadDim128AndPortableElsewhere) {
  for (std::int64_t rows : {1, 128}) {
    for (std::int64_t d : {64, 128}) {
      jit::detail::AttnProblem p = problem(d);
      p.fp8_qkv = true;
      p.seq_q = rows;
      EXPECT_EQ(jit::detail::attention_family_for(p, jit::offline_target("sm_90a")).name(),
                d == 128 ? "attn_fwd_sm90" : "attn_fwd_portable")
          << "d" << d << " rows " << rows;
      EXPECT_EQ(jit::detail::attention_family_for(p, jit::offline_target("sm_89")).name(), "attn_fwd_portable")
          << "d" << d << " rows " << rows;
    }
  }
}

// Background tuning serves a first call on the family quickest to compile:
// portable where sm90 is tuned and portable has the head dim.
TEST_F(FamilyChoice, FirstCallsWhileTuningTakeTheQuickestFamilyToCompile) {
  const jit::Target hopper = jit::offline_target("sm_90a");
  for (int d : {64, 128}) {
    EXPECT_EQ(jit::detail::first_call_family_for(problem(d), hopper).name(), "attn_fwd_portable") << "d" << d;
  }
  EXPECT_EQ(jit::detail::first_call_family_for(problem(256), hopper).name(), "attn_fwd_sm90");
  EXPECT_EQ(jit::detail::first_call_family_for(problem(128), jit::offline_target("sm_89")).name(),
            "attn_fwd_portable");
  jit::detail::AttnProblem decode = problem(128);  // few rows per KV head: the decode family's
  decode.seq_q = 1;
  EXPECT_EQ(jit::detail::first_call_family_for(decode, hopper).name(),
            jit::detail::attention_family_for(decode, hopper).name());
}

TEST_F(FamilyChoice, NoFamilyIsUnsupportedAndSaysWhatIs) {
  try {
    jit::detail::attention_family_for(problem(256), jit::offline_target("sm_89"));
    FAIL() << "head dim 256 on sm_89 was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("head dim 256"), std::string::npos) << e.what();
  }
  try {
    jit::detail::attention_family_for(problem(96), jit::offline_target("sm_90a"));
    FAIL() << "head dim 96 on sm_90a was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("64, 128, 256"), std::string::npos) << e.what();
  }
}

// The registry: fastest first, each family's head dims from
// kernel_src/attention/head_dims.h, and what a forced family needs said the
// way CUJIT_FAMILY's error says it.
TEST(FamilyRegistry, FastestFirstWithTheKernelsHeadDims) {
  const auto& families = jit::detail::attention_families();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].family, &jit::detail::decode_attention_family());
  EXPECT_EQ(families[1].family, &jit::detail::sm90_attention_family());
  EXPECT_EQ(families[2].family, &jit::detail::portable_attention_family());
  EXPECT_EQ(jit::detail::head_dims_text(families[0].head_dims), "64, 128, 256");
  EXPECT_EQ(jit::detail::head_dims_text(families[1].head_dims), "64, 128, 256");
  EXPECT_EQ(jit::detail::head_dims_text(families[2].head_dims), "64, 128");
  EXPECT_TRUE(families[0].runs_on(jit::offline_target("sm_80")));
  EXPECT_TRUE(families[1].runs_on(jit::offline_target("sm_90a")));
  EXPECT_FALSE(families[1].runs_on(jit::offline_target("sm_89")));
  EXPECT_TRUE(families[2].runs_on(jit::offline_target("sm_80")));
}

TEST(FamilyRegistry, ForcedSm90SaysWhatItNeeds) {
  const jit::detail::FamilyRegistration sm90 = jit::detail::attention_families()[1];
  ASSERT_NE(sm90.requirements, nullptr);
  EXPECT_EQ(sm90.requirements(problem(96), jit::offline_target("sm_89")),
            "an sm_90a GPU (this is sm_89) and head dim 64, 128 or 256 (this is 96; 128 or 256 with e4m3 inputs)");
  EXPECT_EQ(jit::detail::attention_families().back().requirements, nullptr);  // portable: the common error
}

// The decode family takes few-row dense problems and KV-cache problems; the
// others take no KV-cache problem with few rows (long chunks: below).
TEST(FamilyRegistry, DecodeTakesFewRowsAndKvCaches) {
  for (const char* arch : {"sm_90a", "sm_89", "sm_80"}) {
    const jit::Target target = jit::offline_target(arch);
    jit::detail::AttnProblem decode = problem(128);
    decode.seq_q = 1;
    decode.heads_q = 32;
    decode.heads_kv = 8;
    EXPECT_EQ(&jit::detail::attention_family_for(decode, target), &jit::detail::decode_attention_family()) << arch;
    jit::detail::AttnProblem many_rows = decode;
    many_rows.seq_q = 17;  // past 16 new rows: a prefill family
    EXPECT_NE(&jit::detail::attention_family_for(many_rows, target), &jit::detail::decode_attention_family()) << arch;
    jit::detail::AttnProblem chunk = many_rows;  // a prefill chunk against a paged cache
    chunk.page_size = 16;
    EXPECT_EQ(&jit::detail::attention_family_for(chunk, target), &jit::detail::decode_attention_family()) << arch;
    EXPECT_FALSE(jit::detail::sm90_attention_family().supports(chunk, target));
    EXPECT_FALSE(jit::detail::portable_attention_family().supports(chunk, target));
  }
}

// A chunk of 128 query rows or more over a 16-bit cache, contiguous or in
// pages of any size, is the sm90 family's on sm_90a (its prefill tiles);
// the decode family keeps the rest: fewer rows, FP8 caches, other targets.
TEST(FamilyRegistry, Sm90TakesLongChunksOverACacheOnHopper) {
  const jit::Target hopper = jit::offline_target("sm_90a");
  const auto* decode = &jit::detail::decode_attention_family();
  const auto* sm90 = &jit::detail::sm90_attention_family();
  jit::detail::AttnProblem chunk = problem(128);
  chunk.heads_q = 32;
  chunk.heads_kv = 8;
  chunk.seq_q = jit::detail::kSm90KvChunkRows;
  chunk.seq_k = 8192;
  chunk.seq_lens = true;
  chunk.causal = true;
  for (int page : {0, 1, 7, 8, 16, 24, 64, 256}) {
    chunk.page_size = page;
    EXPECT_EQ(&jit::detail::attention_family_for(chunk, hopper), sm90) << "page " << page;
    // Forced, the decode family still serves it.
    EXPECT_EQ(&jit::detail::attention_family_for(chunk, hopper, "decode"), decode) << "page " << page;
  }
  chunk.page_size = 16;
  for (const char* arch : {"sm_89", "sm_80"}) {
    EXPECT_EQ(&jit::detail::attention_family_for(chunk, jit::offline_target(arch)), decode) << arch;
  }
  jit::detail::AttnProblem fewer = chunk;
  fewer.seq_q = jit::detail::kSm90KvChunkRows - 1;
  EXPECT_EQ(&jit::detail::attention_family_for(fewer, hopper), decode);
  jit::detail::AttnProblem fp8 = chunk;
  fp8.fp8_kv = true;
  EXPECT_EQ(&jit::detail::attention_family_for(fp8, hopper), decode);
  jit::detail::AttnProblem d96 = chunk;
  d96.head_dim = 96;
  EXPECT_FALSE(sm90->supports(d96, hopper));
}

// The sm90 family's spec over a KV cache says so ("cache", and "paged" with
// the page size compiled in where TMA loads pages of 64 keys or more, none
// where rows are gathered from smaller pages or pages of other sizes),
// names its variants `_cache_`, `_paged<P>_` or `_paged_`, passes KV_CACHE
// and PAGE (-1: gathered) to the kernel, and keeps the block sizes whose
// blocks are whole TMA pages or parts of one, or at most 128 gathered rows.
TEST(FamilyRegistry, Sm90CacheSpecsNameTheirCacheAndKeepBlocksThatFitItsPages) {
  const jit::Target hopper = jit::offline_target("sm_90a");
  const auto& sm90 = jit::detail::sm90_attention_family();
  jit::detail::AttnProblem chunk = problem(128);
  chunk.heads_q = 32;
  chunk.heads_kv = 8;
  chunk.seq_q = 512;
  chunk.seq_k = 8192;
  chunk.seq_lens = true;
  chunk.causal = true;
  chunk.page_size = 64;
  const jit::Json paged = sm90.spec_for(chunk);
  EXPECT_EQ(paged.at("cache"), true);
  EXPECT_EQ(paged.at("paged"), true);
  EXPECT_EQ(paged.at("page"), 64);
  EXPECT_EQ(paged.get<jit::detail::AttnSpec>(), sm90.spec_for(chunk));  // the JSON round trip
  const jit::Json config = {{"bm", 128}, {"bn", 128}, {"stages", 2}};
  EXPECT_EQ(sm90.variant_name(paged, config), "attn_fwd_sm90_d128_f16_causal_paged64_bm128_bn128_st2");
  EXPECT_EQ(sm90.name_expression(paged, config),
            "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::f16, true, false, cujit::f16, false, true, 64>");
  EXPECT_EQ(sm90.why_pruned(paged, config, hopper), std::nullopt);
  EXPECT_TRUE(sm90.why_pruned(paged, {{"bm", 128}, {"bn", 80}, {"stages", 2}}, hopper).has_value())
      << "80 keys: neither whole pages of 64 nor a part of one";
  EXPECT_EQ(sm90.why_pruned(paged, {{"bm", 128}, {"bn", 64}, {"stages", 2}}, hopper), std::nullopt);
  for (int page : {1, 16, 32, 48, 96}) {
    chunk.page_size = page;
    const jit::Json gathered = sm90.spec_for(chunk);
    EXPECT_EQ(gathered.at("paged"), true) << page;
    EXPECT_FALSE(gathered.contains("page")) << page;
    EXPECT_EQ(sm90.variant_name(gathered, config), "attn_fwd_sm90_d128_f16_causal_paged_bm128_bn128_st2");
    EXPECT_EQ(sm90.name_expression(gathered, config),
              "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::f16, true, false, cujit::f16, false, true, -1>");
    EXPECT_EQ(sm90.why_pruned(gathered, config, hopper), std::nullopt) << page;
    EXPECT_EQ(sm90.why_pruned(gathered, {{"bm", 128}, {"bn", 80}, {"stages", 2}}, hopper), std::nullopt) << page;
    EXPECT_TRUE(sm90.why_pruned(gathered, {{"bm", 128}, {"bn", 176}, {"stages", 2}}, hopper).has_value())
        << "176 gathered rows: more than a producer warp's lane a row";
  }
  chunk.page_size = 0;
  const jit::Json contiguous = sm90.spec_for(chunk);
  EXPECT_FALSE(contiguous.contains("paged"));
  EXPECT_EQ(sm90.variant_name(contiguous, config), "attn_fwd_sm90_d128_f16_causal_cache_bm128_bn128_st2");
  EXPECT_EQ(sm90.why_pruned(contiguous, config, hopper), std::nullopt);
  EXPECT_EQ(sm90.why_pruned(contiguous, {{"bm", 128}, {"bn", 80}, {"stages", 2}}, hopper), std::nullopt);
  EXPECT_EQ(sm90.name_expression(contiguous, config),
            "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::f16, true, false, cujit::f16, false, true, 0>");
  // Without a cache the names and template arguments are the dense kernel's.
  const jit::Json dense = sm90.spec_for(problem(128));
  EXPECT_FALSE(dense.contains("cache"));
  EXPECT_EQ(sm90.name_expression(dense, config),
            "cujit::sm90::attn_fwd_sm90<128, 128, 128, 2, cujit::f16, false, false, cujit::f16, false>");
}

// Head dim 256 on sm_89 exists only for the decode family: a prefill problem
// there says what that family needs rather than listing 256 as supported.
TEST(FamilyRegistry, HeadDimOfOnlyTheDecodeFamilySaysWhatItNeeds) {
  try {
    jit::detail::attention_family_for(problem(256), jit::offline_target("sm_89"));
    FAIL() << "a prefill problem at head dim 256 was accepted on sm_89";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("head dim 256 has only the decode family, which needs"), std::string::npos)
        << e.what();
  }
}

// Head dim 256 beyond sm_90's 16-bit caches (sm_80, sm_89, FP8 caches) fits
// the registers only in the decode family's blocks of at most 8 packed rows.
TEST(FamilyRegistry, HeadDim256ElsewhereTakesAtMostEightRowsPerKvHead) {
  const jit::detail::AttentionFamily& decode = jit::detail::decode_attention_family();
  const jit::Target sm90 = jit::offline_target("sm_90a"), sm89 = jit::offline_target("sm_89"),
                    sm80 = jit::offline_target("sm_80");
  jit::detail::AttnProblem p = problem(256);
  p.seq_q = 1;
  p.heads_q = 16;
  p.heads_kv = 2;  // 8 packed rows
  p.page_size = 16;
  EXPECT_EQ(decode.spec_for(p).block_m, 8);
  for (const jit::Target& target : {sm90, sm89, sm80}) EXPECT_TRUE(decode.supports(p, target)) << target.arch;
  jit::detail::AttnProblem e4m3 = p;
  e4m3.fp8_kv = true;
  EXPECT_TRUE(decode.supports(e4m3, sm90));
  EXPECT_TRUE(decode.supports(e4m3, sm89));
  EXPECT_FALSE(decode.supports(e4m3, sm80)) << "e4m3 conversions need sm_89";
  jit::detail::AttnProblem e5m2 = e4m3;
  e5m2.fp8_format = jit::DType::e5m2;
  EXPECT_TRUE(decode.supports(e5m2, sm80));
  p.seq_q = e4m3.seq_q = 2;  // 16 packed rows
  EXPECT_TRUE(decode.supports(p, sm90)) << "sm_90 takes head dim 256 in 16-row blocks over a 16-bit cache";
  EXPECT_FALSE(decode.supports(p, sm89));
  EXPECT_FALSE(decode.supports(e4m3, sm90));
}

// The decode family forced on FP8 q, k and v (which it does not take: its q
// is 16-bit) says so.
TEST(FamilyRegistry, ForcedDecodeSaysItsQIs16Bit) {
  jit::detail::AttnProblem fp8 = problem(128);
  fp8.seq_q = 1;
  fp8.fp8_qkv = true;
  try {
    jit::detail::attention_family_for(fp8, jit::offline_target("sm_90a"), "decode");
    FAIL() << "the decode family was forced on FP8 q";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("q in f16 or bf16"), std::string::npos) << e.what();
  }
}

// CUJIT_FAMILY forces a registered family by its name; one that names none
// is refused with the names there are.
TEST(FamilyRegistry, ForcedByName) {
  const auto hopper = jit::offline_target("sm_90a");
  EXPECT_EQ(&jit::detail::attention_family_for(problem(64), hopper, "portable"),
            &jit::detail::portable_attention_family());
  EXPECT_EQ(&jit::detail::attention_family_for(problem(64), hopper, "sm90"), &jit::detail::sm90_attention_family());
  EXPECT_EQ(&jit::detail::attention_family_for(problem(64), hopper, ""), &jit::detail::sm90_attention_family());
  try {
    jit::detail::attention_family_for(problem(64), hopper, "hopper");
    ADD_FAILURE() << "an unknown family name was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CUJIT_FAMILY='hopper' names no attention family; it is one of auto, decode, "
                                         "sm90, portable"),
              std::string::npos)
        << e.what();
  }
  try {
    jit::detail::attention_family_for(problem(64), jit::offline_target("sm_89"), "sm90");
    ADD_FAILURE() << "sm90 was forced on sm_89";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("CUJIT_FAMILY=sm90, but the sm90 family needs an sm_90a GPU"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FamilyChoice, EveryHeadDimOfTheListIsServedAndNoOther) {
  for (int d = 16; d <= 512; d += 16) {
    const bool listed = cujit::kSm90HeadDims.contains(d);
    bool served = true;
    try {
      jit::detail::attention_family_for(problem(d), jit::offline_target("sm_90a"));
    } catch (const jit::Error&) {
      served = false;
    }
    EXPECT_EQ(served, listed) << "d" << d;
  }
}

}  // namespace
