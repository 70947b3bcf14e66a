// Tests for jit/warmup: shape and manifest parsing, and an offline warm-up
// into the disk cache through NVRTC (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include "autotune/prune.h"
#include "cache/cubin_store.h"
#include "jit/attention/families.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/warmup_shapes.h"
#include "jit/binary_cache.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
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
// `arch` would compile, so that a cache directory reused across runs (a preset
// CUJIT_CACHE_DIR, --gtest_repeat) cannot turn the first warm-up into hits.
void forget_cached_variants(const jit::Json& spec, const std::string& arch) {
  const jit::KernelFamily& family = jit::detail::portable_attention_family();
  const jit::cache::CubinStore store(jit::cache_directory());
  for (const jit::Json& config : jit::autotune::prune_space(family, spec, jit::offline_target(arch)).kept) {
    const jit::detail::CompileRequest request{&family.sources(), family.name_expression(spec, config), arch,
                                              family.compile_options(spec, config)};
    std::error_code ignored;
    std::filesystem::remove(store.entry_path(jit::detail::binary_cache_key(request)), ignored);
  }
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

// The head dims each arch's families serve, with both dtypes and causal or not.
void expect_specializations(const std::string& arch, const std::set<std::int64_t>& head_dims) {
  SCOPED_TRACE(arch);
  std::set<std::tuple<DType, std::int64_t, bool, bool>> seen;
  for (const AttentionShape& s : jit::all_attention_specializations(arch)) {
    EXPECT_GT(s.batch, 0);
    EXPECT_GT(s.heads, 0);
    EXPECT_GT(s.seq, 0);
    EXPECT_TRUE(head_dims.count(s.head_dim)) << "head dim " << s.head_dim << " is not served on " << arch;
    seen.insert({s.dtype, s.head_dim, s.causal, s.varlen});
  }
  for (DType dtype : {DType::f16, DType::bf16})
    for (std::int64_t d : head_dims)
      for (bool causal : {false, true})
        for (bool varlen : {false, true}) {
          EXPECT_TRUE(seen.count({dtype, d, causal, varlen}))
              << jit::to_string(dtype) << " d" << d << (causal ? " causal" : "") << (varlen ? " ragged" : "");
        }
}

TEST(AllAttentionSpecializations, CoversWhatEachArchServes) {
  if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set";
  expect_specializations("sm_90a", {64, 128, 256});
  expect_specializations("sm_89", {64, 128});
  expect_specializations("sm_80", {64, 128});
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
