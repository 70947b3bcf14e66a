// Tests for jit/warmup: shape and manifest parsing, and an offline warm-up
// into the disk cache through NVRTC (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "autotune/prune.h"
#include "cache/cubin_store.h"
#include "jit/attention/families.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/kv_validation.h"
#include "jit/attention/warmup_shapes.h"
#include "jit/binary_cache.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "jit/serving.h"
#include "jit/warmup.h"

using jit::AttentionShape;
using jit::DType;

namespace {

template <class Fn>
std::string expect_error(jit::ErrorCode code, Fn&& fn) {
  try {
    fn();
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected jit::Error(" << jit::to_string(code) << "), got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected jit::Error(" << jit::to_string(code) << "), nothing was thrown";
  return "";
}

// Removes the disk-cache entries of every variant a warm-up of `spec` for
// `arch` would compile (its companions' included), so that a cache directory
// reused across runs (a preset CUJIT_CACHE_DIR, --gtest_repeat) cannot turn
// the first warm-up into hits.
void forget_cached_variants(const jit::detail::AttentionFamily& family, const jit::Json& spec,
                            const std::string& arch) {
  const jit::cache::CubinStore store(jit::cache_directory());
  auto forget = [&](const jit::KernelFamily& f, const jit::Json& s, const jit::Json& config) {
    const jit::detail::CompileRequest request{&f.sources(), f.name_expression(s, config), arch,
                                              f.compile_options(s, config)};
    std::error_code ignored;
    std::filesystem::remove(store.entry_path(jit::detail::binary_cache_key(request)), ignored);
  };
  for (const jit::Json& config : jit::autotune::prune_space(family, spec, jit::offline_target(arch)).kept) {
    forget(family, spec, config);
  }
  for (const auto& companion : family.companions(spec)) forget(*companion.family, companion.spec, companion.config);
}

void forget_cached_variants(const jit::Json& spec, const std::string& arch) {
  forget_cached_variants(jit::detail::portable_attention_family(), spec, arch);
}

}  // namespace

// --- parse_attention_shape ---------------------------------------------------------

TEST(ParseAttentionShape, Fields) {
  const AttentionShape s = jit::parse_attention_shape("1,16,1024,64,fp16,0");
  EXPECT_EQ(s.batch, 1);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.seq, 1024);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.dtype, DType::f16);
  EXPECT_FALSE(s.causal);
}

TEST(ParseAttentionShape, Bf16AndCausal) {
  const AttentionShape s = jit::parse_attention_shape("4,32,2048,128,bf16,1");
  EXPECT_EQ(s.batch, 4);
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.seq, 2048);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.dtype, DType::bf16);
  EXPECT_TRUE(s.causal);
  EXPECT_EQ(jit::parse_attention_shape("1,1,1,64,f16,1").dtype, DType::f16);  // the other documented spelling
}

TEST(ParseAttentionShape, RejectsBadInput) {
  for (const char* text : {
           "1,16,1024,64,fp16",          // 5 fields
           "1,16,1024,64,fp16,0,7",      // 7 fields
           "",                           // none
           "1;16;1024;64;fp16;0",        // wrong separator
           "one,16,1024,64,fp16,0",      // non-integer
           "1,16,,64,fp16,0",            // empty size
           "1,16,1024,x64,fp16,0",       // non-integer
           "0,16,1024,64,fp16,0",        // zero batch
           "1,0,1024,64,fp16,0",         // zero heads
           "1,16,0,64,fp16,0",           // zero seq
           "1,16,1024,0,fp16,0",         // zero head dim
           "1,16,-1024,64,fp16,0",       // negative
           "1,16,1024,64,fp8,0",         // dtype
           "1,16,1024,64,,0",            // empty dtype
           "1,16,1024,64,fp16,2",        // causal
           "1,16,1024,64,fp16,true",     // causal
           "1,16,1024,64,fp16,",         // empty causal
       }) {
    SCOPED_TRACE(text);
    const std::string message =
        expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_shape(text); });
    EXPECT_FALSE(message.empty());
  }
}

TEST(ParseAttentionShape, MessagesSayWhatIsWrong) {
  EXPECT_NE(expect_error(jit::ErrorCode::InvalidArgument, [] { jit::parse_attention_shape("1,16,1024,64,fp8,0"); })
                .find("fp8"),
            std::string::npos);
  EXPECT_NE(expect_error(jit::ErrorCode::InvalidArgument, [] { jit::parse_attention_shape("1,16,1024,64,fp16,2"); })
                .find("causal"),
            std::string::npos);
  EXPECT_NE(expect_error(jit::ErrorCode::InvalidArgument, [] { jit::parse_attention_shape("1,16,1024"); })
                .find("B,H,S,D,dtype,causal"),
            std::string::npos);
}

// Sizes must be whole integers and the field count exact: no prefix parsing.
TEST(ParseAttentionShape, TwentyDigitSizeIsOutOfRange) {
  const std::string message = expect_error(jit::ErrorCode::InvalidArgument,
                                           [] { jit::parse_attention_shape("1,16,99999999999999999999,64,fp16,0"); });
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
  EXPECT_EQ(message.find("not an integer"), std::string::npos) << message;
}

TEST(ParseAttentionShape, RejectsTrailingGarbageInSizes) {
  for (const char* text : {"1,16,1024,64.5,fp16,0", "1,16,1024x,64,fp16,0", "1e3,16,1024,64,fp16,0",
                           "1,16,1024,64,fp16,0,"}) {
    SCOPED_TRACE(text);
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_shape(text); });
  }
}

// --- parse_attention_manifest ---------------------------------------------------------

TEST(ParseAttentionManifest, TwoShapes) {
  const auto shapes = jit::parse_attention_manifest(R"({"shapes": [
      {"batch": 2, "heads": 8, "seq": 4096, "head_dim": 128, "dtype": "bf16", "causal": true, "varlen": true},
      {"seq": 512, "head_dim": 64}
  ]})");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].batch, 2);
  EXPECT_EQ(shapes[0].heads, 8);
  EXPECT_EQ(shapes[0].seq, 4096);
  EXPECT_EQ(shapes[0].head_dim, 128);
  EXPECT_EQ(shapes[0].dtype, DType::bf16);
  EXPECT_TRUE(shapes[0].causal);
  EXPECT_TRUE(shapes[0].varlen);
  // Documented defaults for what the second one leaves out.
  EXPECT_EQ(shapes[1].batch, 1);
  EXPECT_EQ(shapes[1].heads, 16);
  EXPECT_EQ(shapes[1].seq, 512);
  EXPECT_EQ(shapes[1].head_dim, 64);
  EXPECT_EQ(shapes[1].dtype, DType::f16);
  EXPECT_FALSE(shapes[1].causal);
  EXPECT_FALSE(shapes[1].varlen);
}

TEST(ParseAttentionManifest, EmptyShapeList) {
  EXPECT_TRUE(jit::parse_attention_manifest(R"({"shapes": []})").empty());
}

TEST(ParseAttentionManifest, RejectsMalformedJson) {
  for (const char* text : {"", "{", R"({"shapes": [{"seq": 512, "head_dim": 64}])", "not json", "[1, 2]",
                           R"({"shape": []})", R"({"shapes": {}})"}) {
    SCOPED_TRACE(text);
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(text); });
  }
}

TEST(ParseAttentionManifest, RejectsMissingOrBadFields) {
  for (const char* text : {
           R"({"shapes": [{"head_dim": 64}]})",                             // no seq
           R"({"shapes": [{"seq": 512}]})",                                 // no head_dim
           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 512}]})",   // the second lacks head_dim
           R"({"shapes": [{"seq": "512", "head_dim": 64}]})",               // seq is a string
           R"({"shapes": [{"seq": 512, "head_dim": 64, "dtype": "fp8"}]})", // dtype
           R"({"shapes": [{"seq": 0, "head_dim": 64}]})",                   // zero size
           R"({"shapes": [{"seq": 512, "head_dim": 64, "batch": -1}]})",    // negative size
           R"({"shapes": [42]})",                                           // not an object
           R"({"shapes": [{"seq": 512, "head_dim": 64, "varlen": 1}]})",    // varlen is not a boolean
       }) {
    SCOPED_TRACE(text);
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(text); });
  }
}

// Each kind of broken manifest gets its own message, not one catch-all.
TEST(ParseAttentionManifest, ParseErrorsSayWhereAndWhat) {
  const auto message = [](const std::string& text) {
    return expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(text); });
  };
  const std::string truncated = message(R"({"shapes": [{"seq": 512, "head_dim": 64})");
  EXPECT_NE(truncated.find("not valid JSON (byte 41)"), std::string::npos) << truncated;
  EXPECT_EQ(truncated.find("[json.exception"), std::string::npos) << truncated;
  const std::string garbage = message("not json");
  EXPECT_NE(garbage.find("not valid JSON (byte 2)"), std::string::npos) << garbage;
  EXPECT_NE(garbage.find("syntax error"), std::string::npos) << garbage;
  EXPECT_NE(message("").find("the manifest is empty"), std::string::npos);
  EXPECT_NE(message(" \n").find("the manifest is empty"), std::string::npos);
  EXPECT_NE(message("[1, 2]").find("it is a JSON array"), std::string::npos) << message("[1, 2]");
  EXPECT_NE(message(R"({"shapes": {}})").find("\"shapes\" array"), std::string::npos);
}

// A number past a double's range is the parser's out_of_range, not a
// parse_error: it too is an InvalidArgument, never a JSON exception.
TEST(ParseAttentionManifest, NumberOverflowIsAnInvalidArgument) {
  const std::string overflow = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [{"seq": 1e1903027402150, "head_dim": 64}]})");
  });
  EXPECT_NE(overflow.find("not valid JSON"), std::string::npos) << overflow;
}

TEST(ParseAttentionManifest, UnknownKeysAreRefusedByNameAndEntry) {
  const std::string misspelled = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 512, "head_dim": 64, "dtyp": "bf16"}]})");
  });
  EXPECT_NE(misspelled.find("entry 1"), std::string::npos) << misspelled;
  EXPECT_NE(misspelled.find("unknown key \"dtyp\""), std::string::npos) << misspelled;
  const std::string top = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [], "shape": []})");
  });
  EXPECT_NE(top.find("unknown key \"shape\""), std::string::npos) << top;
}

TEST(ParseAttentionManifest, BadSizesNameTheirEntry) {
  for (const char* text : {R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 0, "head_dim": 64}]})",
                           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 512, "head_dim": 64, "batch": -2}]})",
                           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 1.5, "head_dim": 64}]})",
                           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"head_dim": 64}]})",
                           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 512, "head_dim": 64, "causal": 1}]})",
                           R"({"shapes": [{"seq": 512, "head_dim": 64}, {"seq": 512, "head_dim": 64, "dtype": "fp8"}]})"}) {
    SCOPED_TRACE(text);
    const std::string message = expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(text); });
    EXPECT_NE(message.find("entry 1"), std::string::npos) << message;
  }
  const std::string huge = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [{"seq": 18446744073709551615, "head_dim": 64}]})");
  });
  EXPECT_NE(huge.find("out of range"), std::string::npos) << huge;
}

// --- KV-cache manifest entries ---------------------------------------------------------

TEST(ParseAttentionManifest, KvCacheEntryDefaults) {
  const auto shapes = jit::parse_attention_manifest(R"({"shapes": [
      {"kv_cache": true, "seq": 4096, "head_dim": 128},
      {"seq": 512, "head_dim": 64}
  ]})");
  ASSERT_EQ(shapes.size(), 2u);
  const AttentionShape& kv = shapes[0];
  EXPECT_TRUE(kv.kv_cache);
  EXPECT_EQ(kv.seq, 4096);
  EXPECT_EQ(kv.new_rows, 1);
  EXPECT_EQ(kv.heads_kv, 0);  // as many as heads
  EXPECT_EQ(kv.page_size, 0);
  EXPECT_FALSE(kv.fp8_kv);
  EXPECT_TRUE(kv.causal);  // as KvAttentionOptions::causal
  EXPECT_FALSE(kv.varlen);
  EXPECT_FALSE(shapes[1].kv_cache);
  EXPECT_FALSE(shapes[1].causal);  // a dense entry's default is unchanged
}

TEST(ParseAttentionManifest, KvCacheEntryKeys) {
  const auto shapes = jit::parse_attention_manifest(R"({"shapes": [
      {"kv_cache": true, "batch": 8, "heads": 32, "heads_kv": 8, "seq": 8192, "head_dim": 128, "dtype": "bf16",
       "causal": false, "new_rows": 4, "page_size": 16, "kv_dtype": "fp8"},
      {"kv_cache": true, "seq": 64, "head_dim": 64, "kv_dtype": "e4m3", "page_size": 0},
      {"kv_cache": true, "seq": 64, "head_dim": 64, "dtype": "bf16", "kv_dtype": "bf16"},
      {"kv_cache": true, "seq": 64, "head_dim": 64, "kv_dtype": "fp16"},
      {"kv_cache": false, "seq": 64, "head_dim": 64},
      {"kv_cache": true, "seq": 64, "head_dim": 64, "kv_dtype": "e5m2", "head_major": true},
      {"kv_cache": true, "seq": 64, "head_dim": 64, "kv_dtype": "fp8", "page_size": 16, "descale_per_page": true}
  ]})");
  ASSERT_EQ(shapes.size(), 7u);
  EXPECT_EQ(shapes[0].batch, 8);
  EXPECT_EQ(shapes[0].heads, 32);
  EXPECT_EQ(shapes[0].heads_kv, 8);
  EXPECT_EQ(shapes[0].dtype, DType::bf16);
  EXPECT_FALSE(shapes[0].causal);
  EXPECT_EQ(shapes[0].new_rows, 4);
  EXPECT_EQ(shapes[0].page_size, 16);
  EXPECT_TRUE(shapes[0].fp8_kv);
  EXPECT_TRUE(shapes[1].fp8_kv);
  EXPECT_EQ(shapes[1].page_size, 0);
  EXPECT_FALSE(shapes[2].fp8_kv);
  EXPECT_EQ(shapes[2].dtype, DType::bf16);
  EXPECT_FALSE(shapes[3].fp8_kv);
  EXPECT_FALSE(shapes[4].kv_cache);
  EXPECT_EQ(shapes[0].fp8_format, DType::e4m3);
  EXPECT_TRUE(shapes[5].fp8_kv);
  EXPECT_EQ(shapes[5].fp8_format, DType::e5m2);
  EXPECT_EQ(jit::detail::problem_of(shapes[5]).kv_dtype(), DType::e5m2);
  EXPECT_FALSE(shapes[0].kv_head_major);
  EXPECT_TRUE(shapes[5].kv_head_major);
  EXPECT_TRUE(jit::detail::problem_of(shapes[0]).kv_token_major);
  EXPECT_FALSE(jit::detail::problem_of(shapes[5]).kv_token_major);
  EXPECT_FALSE(shapes[0].kv_descale_per_page);
  EXPECT_TRUE(shapes[6].kv_descale_per_page);
  EXPECT_TRUE(jit::detail::problem_of(shapes[6]).descale_per_page);
}

// The README's example manifest, as printed there.
TEST(ParseAttentionManifest, ReadmeKvCacheExample) {
  const auto shapes = jit::parse_attention_manifest(R"({"shapes": [
  {"kv_cache": true, "batch": 64, "heads": 32, "heads_kv": 8, "seq": 8192, "head_dim": 128,
   "dtype": "bf16", "page_size": 16},
  {"kv_cache": true, "batch": 64, "heads": 32, "heads_kv": 8, "seq": 8192, "head_dim": 128,
   "dtype": "bf16", "page_size": 16, "kv_dtype": "fp8"}
]})");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_FALSE(shapes[0].fp8_kv);
  EXPECT_TRUE(shapes[1].fp8_kv);
}

// Each error names the entry (by index) and the key at fault.
TEST(ParseAttentionManifest, KvCacheErrorsNameEntryAndKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"new_rows": 2})", "new_rows"},
      {R"({"heads_kv": 4})", "heads_kv"},
      {R"({"page_size": 16})", "page_size"},
      {R"({"kv_dtype": "fp8"})", "kv_dtype"},
      {R"({"head_major": true})", "head_major"},
      {R"({"kv_cache": true, "head_major": 1})", "head_major"},
      {R"({"descale_per_page": true})", "descale_per_page"},
      // Factors per page are for a paged FP8 cache (plan_kv_attention's check).
      {R"({"kv_cache": true, "kv_dtype": "fp8", "descale_per_page": true})", "descale_per_page"},
      {R"({"kv_cache": false, "page_size": 16})", "page_size"},
      {R"({"kv_cache": true, "varlen": true})", "varlen"},
      {R"({"kv_cache": "yes"})", "kv_cache"},
      {R"({"kv_cache": true, "kv_dtype": "bf16"})", "kv_dtype"},  // the entry's dtype is fp16
      {R"({"kv_cache": true, "kv_dtype": "fp32"})", "kv_dtype"},
      {R"({"kv_cache": true, "kv_dtype": 8})", "kv_dtype"},
      {R"({"kv_cache": true, "new_rows": 0})", "new_rows"},
      {R"({"kv_cache": true, "heads_kv": 0})", "heads_kv"},
      {R"({"kv_cache": true, "page_size": -1})", "page_size"},
      {R"({"kv_cache": true, "page_size": 1.5})", "page_size"},
      // Refused by plan_kv_attention's own checks, named with the entry.
      {R"({"kv_cache": true, "page_size": 300})", "page_size"},
      {R"({"kv_cache": true, "heads": 12, "heads_kv": 8})", "heads_kv"},
  };
  for (const auto& [fields, key] : cases) {
    // The bad entry is the second one, after the sizes every entry needs.
    std::string entry = fields;
    entry.insert(1, R"("seq": 512, "head_dim": 64, )");
    const std::string text = R"({"shapes": [{"seq": 512, "head_dim": 64}, )" + entry + "]}";
    SCOPED_TRACE(text);
    const std::string message =
        expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(text); });
    EXPECT_NE(message.find("entry 1"), std::string::npos) << message;
    EXPECT_NE(message.find(key), std::string::npos) << message;
  }
  const std::string without = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [{"seq": 512, "head_dim": 64, "page_size": 16}]})");
  });
  EXPECT_NE(without.find("\"kv_cache\": true"), std::string::npos) << without;
}

TEST(ParseAttentionManifest, UnknownKeyMessageListsTheKvKeys) {
  const std::string message = expect_error(jit::ErrorCode::InvalidArgument, [] {
    jit::parse_attention_manifest(R"({"shapes": [{"seq": 512, "head_dim": 64, "pages": 16}]})");
  });
  for (const char* key :
       {"kv_cache", "new_rows", "heads_kv", "page_size", "kv_dtype", "head_major", "descale_per_page"}) {
    EXPECT_NE(message.find(key), std::string::npos) << key << ": " << message;
  }
}

TEST(ReadAttentionManifest, FilesDirectoriesAndTheirNames) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "cujit-manifest-test";
  std::filesystem::create_directories(dir);
  const std::string is_dir =
      expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::read_attention_manifest(dir.string()); });
  EXPECT_NE(is_dir.find("manifest " + dir.string() + " is a directory"), std::string::npos) << is_dir;
  const std::string missing = expect_error(jit::ErrorCode::InvalidArgument,
                                           [&] { jit::read_attention_manifest((dir / "missing.json").string()); });
  EXPECT_NE(missing.find("cannot read manifest " + (dir / "missing.json").string()), std::string::npos) << missing;
  const std::filesystem::path file = dir / "shapes.json";
  {
    std::ofstream(file) << R"({"shapes": [{"seq": 512, "head_dim": 64, "dtyp": "bf16"}]})";
  }
  const std::string named =
      expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::read_attention_manifest(file.string()); });
  EXPECT_NE(named.find("manifest " + file.string() + " entry 0"), std::string::npos) << named;
  {
    std::ofstream(file) << R"({"shapes": [{"seq": 512, "head_dim": 64, "dtype": "bf16"}]})";
  }
  const auto shapes = jit::read_attention_manifest(file.string());
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].dtype, DType::bf16);
  std::filesystem::remove_all(dir);
}

// A manifest that never ends (finding: `--manifest /dev/zero` read without
// limit) is refused once it passes the size cap.
TEST(ReadAttentionManifest, EndlessFileIsRefusedAtTheCap) {
  const std::string endless =
      expect_error(jit::ErrorCode::InvalidArgument, [] { jit::read_attention_manifest("/dev/zero"); });
  EXPECT_NE(endless.find("more than the"), std::string::npos) << endless;
}

// --- all_attention_specializations ----------------------------------------------------

// The head dims each arch's families serve, with both dtypes and causal or
// not, dense and ragged; with q, k and v in e4m3 at fp8_head_dims (none
// before sm_89), and nothing else.
void expect_specializations(const std::string& arch, const std::set<std::int64_t>& head_dims,
                            const std::set<std::int64_t>& fp8_head_dims) {
  SCOPED_TRACE(arch);
  std::set<std::tuple<bool, DType, std::int64_t, bool, bool>> seen;
  for (const AttentionShape& s : jit::all_attention_specializations(arch)) {
    EXPECT_GT(s.batch, 0);
    EXPECT_GT(s.heads, 0);
    EXPECT_GT(s.seq, 0);
    EXPECT_FALSE(s.kv_cache);
    EXPECT_TRUE((s.fp8_qkv ? fp8_head_dims : head_dims).count(s.head_dim))
        << (s.fp8_qkv ? "FP8 " : "") << "head dim " << s.head_dim << " is not served on " << arch;
    EXPECT_TRUE(seen.insert({s.fp8_qkv, s.dtype, s.head_dim, s.causal, s.varlen}).second) << "listed twice";
  }
  for (bool fp8 : {false, true})
    for (DType dtype : {DType::f16, DType::bf16})
      for (std::int64_t d : fp8 ? fp8_head_dims : head_dims)
        for (bool causal : {false, true})
          for (bool varlen : {false, true}) {
            EXPECT_TRUE(seen.count({fp8, dtype, d, causal, varlen}))
                << (fp8 ? "e4m3 to " : "") << jit::to_string(dtype) << " d" << d << (causal ? " causal" : "")
                << (varlen ? " ragged" : "");
          }
}

TEST(AllAttentionSpecializations, CoversWhatEachArchServes) {
  if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set";
  expect_specializations("sm_90a", {64, 128, 256}, {64, 128, 256});
  expect_specializations("sm_89", {64, 128}, {64, 128});
  expect_specializations("sm_80", {64, 128}, {});
}

// --- warm_up_attention (NVRTC, no GPU) -------------------------------------------------

TEST(WarmUpAttention, SecondIdenticalWarmUpCompilesNothing) {
  if (jit::cache_directory().empty()) GTEST_SKIP() << "the disk cache is off (CUJIT_DISK_CACHE=0)";
  AttentionShape shape;
  shape.head_dim = 64;
  shape.dtype = DType::f16;
  shape.causal = false;
  forget_cached_variants({{"dtype", "f16"}, {"d", 64}, {"causal", false}}, "sm_89");

  std::size_t progress_calls = 0, last_total = 0;
  const jit::WarmupSummary first =
      jit::warm_up_attention({"sm_89"}, {shape}, 2, [&](const jit::CompileReport& report, std::size_t done,
                                                        std::size_t total) {
        ++progress_calls;
        EXPECT_EQ(done, progress_calls);  // called under the summary's lock, in order
        EXPECT_EQ(report.arch, "sm_89");
        last_total = total;
      });
  for (const std::string& error : first.errors) ADD_FAILURE() << error;
  EXPECT_GT(first.compiled, 0);
  EXPECT_EQ(first.cached, 0);
  EXPECT_EQ(first.failed, 0);
  EXPECT_EQ(first.tuned, 0);
  EXPECT_EQ(progress_calls, std::size_t(first.compiled));
  EXPECT_EQ(last_total, std::size_t(first.compiled));

  const jit::Stats before = jit::stats();
  const jit::WarmupSummary second = jit::warm_up_attention({"sm_89"}, {shape}, 2);
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.cached, first.compiled);
  EXPECT_EQ(second.failed, 0);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);

  // The same shape listed twice (or with other sizes) adds no variants.
  AttentionShape bigger = shape;
  bigger.seq = 8192;
  bigger.batch = 4;
  const jit::WarmupSummary third = jit::warm_up_attention({"sm_89"}, {shape, bigger, shape}, 2);
  EXPECT_EQ(third.compiled, 0);
  EXPECT_EQ(third.cached, first.compiled);
}

TEST(WarmUpAttention, UnsupportedHeadDimThrows) {
  AttentionShape shape;
  shape.head_dim = 96;
  const std::string message =
      expect_error(jit::ErrorCode::Unsupported, [&] { jit::warm_up_attention({"sm_89"}, {shape}, 2); });
  EXPECT_NE(message.find("96"), std::string::npos) << message;
}

TEST(WarmUpAttention, UnknownArchThrows) {
  expect_error(jit::ErrorCode::InvalidArgument, [] { jit::warm_up_attention({"sm_75"}, {AttentionShape{}}, 2); });
}

// A KV-cache shape compiles the decode family's variants for its one spec
// (and the combine pass), and a second run finds them all.
TEST(WarmUpAttention, KvCacheShapeCompilesTheDecodeVariants) {
  if (jit::cache_directory().empty()) GTEST_SKIP() << "the disk cache is off (CUJIT_DISK_CACHE=0)";
  if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set";
  AttentionShape shape;
  shape.kv_cache = true;
  shape.heads = 8;
  shape.heads_kv = 2;
  shape.seq = 2048;
  shape.head_dim = 64;
  shape.page_size = 16;
  shape.causal = true;
  const jit::detail::AttnProblem problem = jit::detail::problem_of(shape);
  const auto& family = jit::detail::attention_family_for(problem, jit::offline_target("sm_89"));
  ASSERT_EQ(family.name(), "attn_decode");
  const jit::Json spec = family.spec_for(problem);
  const std::size_t configs = jit::autotune::prune_space(family, spec, jit::offline_target("sm_89")).kept.size();
  ASSERT_GT(configs, 0u);
  const std::size_t variants = configs + family.companions(spec).size();  // the combine pass
  forget_cached_variants(family, spec, "sm_89");

  const jit::WarmupSummary first = jit::warm_up_attention({"sm_89"}, {shape}, 2);
  for (const std::string& error : first.errors) ADD_FAILURE() << error;
  EXPECT_EQ(first.failed, 0);
  EXPECT_EQ(std::size_t(first.compiled), variants);
  EXPECT_EQ(first.cached, 0);

  const jit::WarmupSummary second = jit::warm_up_attention({"sm_89"}, {shape}, 2);
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.cached, first.compiled);
  EXPECT_EQ(second.failed, 0);
}

// As an unsupported head dim: one Error(Unsupported) before anything
// compiles, saying why, not a failed compile per variant.
TEST(WarmUpAttention, Fp8CacheOnSm80Throws) {
  AttentionShape shape;
  shape.kv_cache = true;
  shape.head_dim = 128;
  shape.page_size = 16;
  shape.fp8_kv = true;
  const std::string message =
      expect_error(jit::ErrorCode::Unsupported, [&] { jit::warm_up_attention({"sm_80"}, {shape}, 2); });
  EXPECT_NE(message.find("FP8"), std::string::npos) << message;
  EXPECT_NE(message.find("sm_80"), std::string::npos) << message;
  shape.head_dim = 256;  // with 16 query heads per KV head: more rows than the 8 head dim 256 takes
  shape.heads = 32;
  shape.heads_kv = 2;
  const std::string wide =
      expect_error(jit::ErrorCode::Unsupported, [&] { jit::warm_up_attention({"sm_90a"}, {shape}, 2); });
  EXPECT_NE(wide.find("head dim 64 or 128 (or 256 with at most 8 query rows per KV head)"), std::string::npos)
      << wide;
}

// FP8 q, k and v: the sm90 family's e4m3 variants on sm_90a at D = 128 and
// 256, the portable family's on sm_89 (not at 256); refused before sm_89 and
// when ragged.
TEST(WarmUpAttention, Fp8InputsCompileTheirOwnVariants) {
  if (jit::cache_directory().empty()) GTEST_SKIP() << "the disk cache is off (CUJIT_DISK_CACHE=0)";
  if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set";
  AttentionShape shape;
  shape.head_dim = 128;
  shape.dtype = DType::bf16;
  shape.fp8_qkv = true;
  const jit::detail::AttnProblem problem = jit::detail::problem_of(shape);
  EXPECT_TRUE(problem.fp8_qkv);
  for (const char* arch : {"sm_90a", "sm_89"}) {
    const auto& family = jit::detail::attention_family_for(problem, jit::offline_target(arch));
    const jit::Json spec = family.spec_for(problem);
    EXPECT_EQ(spec.at("qkv"), "e4m3") << arch;
    const std::vector<jit::Json> configs = jit::autotune::prune_space(family, spec, jit::offline_target(arch)).kept;
    ASSERT_FALSE(configs.empty()) << arch;
    EXPECT_NE(family.variant_name(spec, configs[0]).find("e4m3_to_bf16"), std::string::npos) << arch;
  }
  const jit::WarmupSummary summary = jit::warm_up_attention({"sm_90a"}, {shape}, 2);
  for (const std::string& error : summary.errors) ADD_FAILURE() << error;
  EXPECT_GT(summary.compiled + summary.cached, 0);
  const std::string old_gpu =
      expect_error(jit::ErrorCode::Unsupported, [&] { jit::warm_up_attention({"sm_80"}, {shape}, 2); });
  EXPECT_NE(old_gpu.find("FP8 (e4m3) attention"), std::string::npos) << old_gpu;
  shape.head_dim = 256;  // the sm90 family's alone
  const jit::WarmupSummary wide = jit::warm_up_attention({"sm_90a"}, {shape}, 2);
  for (const std::string& error : wide.errors) ADD_FAILURE() << error;
  EXPECT_GT(wide.compiled + wide.cached, 0);
  const std::string wide_on_ada =
      expect_error(jit::ErrorCode::Unsupported, [&] { jit::warm_up_attention({"sm_89"}, {shape}, 2); });
  EXPECT_NE(wide_on_ada.find("256 on sm_90a"), std::string::npos) << wide_on_ada;
  // A ragged FP8 batch: the family's varlen FP8 variant.
  shape.head_dim = 128;
  shape.varlen = true;
  const jit::detail::AttnProblem ragged = jit::detail::problem_of(shape);
  EXPECT_TRUE(ragged.fp8_qkv && ragged.varlen);
  const jit::WarmupSummary ragged_summary = jit::warm_up_attention({"sm_90a", "sm_89"}, {shape}, 2);
  for (const std::string& error : ragged_summary.errors) ADD_FAILURE() << error;
  EXPECT_GT(ragged_summary.compiled + ragged_summary.cached, 0);
}

TEST(ParseAttentionManifest, QkvDtypeMakesAnFp8Shape) {
  const std::vector<AttentionShape> shapes = jit::parse_attention_manifest(R"({"shapes": [
      {"seq": 4096, "head_dim": 128, "dtype": "bf16", "qkv_dtype": "fp8"},
      {"seq": 64, "head_dim": 64, "qkv_dtype": "e4m3"},
      {"seq": 64, "head_dim": 64, "qkv_dtype": "fp16"}
  ]})");
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_TRUE(shapes[0].fp8_qkv);
  EXPECT_EQ(shapes[0].dtype, DType::bf16);
  EXPECT_TRUE(shapes[1].fp8_qkv);
  EXPECT_FALSE(shapes[2].fp8_qkv);
  const std::vector<AttentionShape> ragged = jit::parse_attention_manifest(
      R"({"shapes": [{"seq": 64, "head_dim": 64, "qkv_dtype": "fp8", "varlen": true}]})");
  ASSERT_EQ(ragged.size(), 1u);
  EXPECT_TRUE(ragged[0].fp8_qkv && ragged[0].varlen);
  for (const char* bad : {R"({"shapes": [{"seq": 64, "head_dim": 64, "qkv_dtype": "bf16"}]})",
                          R"({"shapes": [{"seq": 64, "head_dim": 64, "qkv_dtype": 8}]})"}) {
    const std::string message =
        expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::parse_attention_manifest(bad); });
    EXPECT_NE(message.find("qkv_dtype"), std::string::npos) << message;
  }
}

TEST(WarmUpAttention, InvalidKvCacheShapeThrows) {
  AttentionShape shape;
  shape.kv_cache = true;
  shape.heads = 12;
  shape.heads_kv = 8;
  const std::string message =
      expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::warm_up_attention({"sm_89"}, {shape}, 2); });
  EXPECT_NE(message.find("heads_kv"), std::string::npos) << message;
}

namespace {

TEST(ParseAttentionManifest, RejectsSizesThatAreNotJsonIntegers) {
  for (const char* text : {R"({"shapes":[{"seq":1e19,"head_dim":64}]})", R"({"shapes":[{"seq":1024,"head_dim":1.5}]})",
                           R"({"shapes":[{"seq":18446744073709551615,"head_dim":64}]})",
                           R"({"shapes":[{"seq":"1024","head_dim":64}]})", R"({"shapes":[7]})"}) {
    SCOPED_TRACE(text);
    try {
      jit::parse_attention_manifest(text);
      ADD_FAILURE() << "accepted";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument);
    }
  }
}

}  // namespace

// A ragged manifest shape is the ragged problem of its sizes, so the warm-up
// compiles the families' ragged variants (and their prepare step).
TEST(WarmupShapes, RaggedShapeIsARaggedProblem) {
  AttentionShape shape;
  shape.batch = 3;
  shape.seq = 512;
  shape.head_dim = 128;
  shape.varlen = true;
  const jit::detail::AttnProblem p = jit::detail::problem_of(shape);
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.seq_q, 512);
  EXPECT_EQ(p.total_q, 3 * 512);
  EXPECT_EQ(p.total_k, 3 * 512);
  const jit::Target target = jit::offline_target("sm_89");
  const auto& family = jit::detail::attention_family_for(p, target);
  const jit::Json spec = family.spec_for(p);
  EXPECT_EQ(spec.value("varlen", false), true) << spec.dump();
  ASSERT_EQ(family.companions(spec).size(), 1u);
  EXPECT_EQ(family.companions(spec)[0].family->name(), "varlen_prepare");
  shape.varlen = false;
  EXPECT_FALSE(jit::detail::problem_of(shape).varlen);
}

// A KV-cache shape is exactly the problem plan_kv_attention makes, so the
// warm-up compiles the decode variants (paged, rows per CTA, FP8) a plan uses.
TEST(WarmupShapes, KvCacheShapeIsThePlansProblem) {
  AttentionShape shape;
  shape.kv_cache = true;
  shape.batch = 4;
  shape.heads = 32;
  shape.heads_kv = 8;
  shape.seq = 4096;
  shape.head_dim = 128;
  shape.dtype = DType::bf16;
  shape.causal = true;
  shape.page_size = 16;
  const jit::detail::AttnProblem p = jit::detail::problem_of(shape);
  EXPECT_EQ(p.page_size, 16);
  EXPECT_TRUE(p.seq_lens);
  EXPECT_EQ(p.seq_q, 1);
  EXPECT_EQ(p.seq_k, 4096);
  EXPECT_EQ(p.heads_q, 32);
  EXPECT_EQ(p.heads_kv, 8);
  EXPECT_FALSE(p.fp8_kv);
  EXPECT_FALSE(p.varlen);

  jit::KvAttentionShape plan_shape;
  plan_shape.batch = 4;
  plan_shape.heads_q = 32;
  plan_shape.heads_kv = 8;
  plan_shape.head_dim = 128;
  plan_shape.dtype = DType::bf16;
  plan_shape.seq_q = 1;
  plan_shape.max_seq_k = 4096;
  plan_shape.page_size = 16;
  plan_shape.per_sequence_lengths = true;
  jit::KvAttentionOptions options;
  options.causal = true;
  EXPECT_TRUE(p == jit::detail::kv_problem_of(plan_shape, options));

  const jit::Target target = jit::offline_target("sm_89");
  const auto& family = jit::detail::attention_family_for(p, target);
  EXPECT_EQ(family.name(), "attn_decode");
  const jit::detail::AttnSpec spec = family.spec_for(p);
  EXPECT_TRUE(spec.paged);
  EXPECT_EQ(spec.block_m, 8);  // 4 query heads per KV head, 1 new row: a block of 8
  EXPECT_FALSE(spec.fp8_kv);
  EXPECT_TRUE(spec.causal);
  ASSERT_EQ(family.companions(spec).size(), 1u);
  EXPECT_EQ(family.companions(spec)[0].family->name(), "attn_decode_combine");

  shape.fp8_kv = true;
  const jit::detail::AttnProblem fp8 = jit::detail::problem_of(shape);
  EXPECT_TRUE(fp8.fp8_kv);
  EXPECT_TRUE(family.spec_for(fp8).fp8_kv);

  // MQA: 32 query heads on one KV head are 32 rows per CTA; a contiguous
  // cache is not paged, and heads_kv 0 means one per query head.
  shape.fp8_kv = false;
  shape.heads_kv = 1;
  shape.page_size = 0;
  const jit::detail::AttnProblem mqa = jit::detail::problem_of(shape);
  EXPECT_EQ(mqa.page_size, 0);
  EXPECT_TRUE(mqa.seq_lens);
  const jit::detail::AttnSpec mqa_spec = family.spec_for(mqa);
  EXPECT_EQ(mqa_spec.block_m, 32);
  EXPECT_FALSE(mqa_spec.paged);
  shape.heads_kv = 0;
  EXPECT_EQ(jit::detail::problem_of(shape).heads_kv, 32);
  shape.new_rows = 4;
  EXPECT_EQ(jit::detail::problem_of(shape).seq_q, 4);
}

TEST(WarmupShapes, InvalidKvCacheShapesAreInvalidArguments) {
  AttentionShape shape;
  shape.kv_cache = true;
  shape.page_size = 300;
  std::string message = expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::detail::problem_of(shape); });
  EXPECT_NE(message.find("page_size"), std::string::npos) << message;
  shape.page_size = 16;
  shape.heads = 12;
  shape.heads_kv = 8;
  message = expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::detail::problem_of(shape); });
  EXPECT_NE(message.find("multiple"), std::string::npos) << message;
  shape.heads_kv = 4;
  shape.varlen = true;
  message = expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::detail::problem_of(shape); });
  EXPECT_NE(message.find("ragged"), std::string::npos) << message;
}
