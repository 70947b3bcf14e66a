// Untrusted JSON at every parse site: the size and depth caps of
// cache/bounded_json.h, typed fields, and what each reader makes of nested
// or mistyped documents (tuning records, cubin metadata, cache listing,
// verify and export, warm-up manifests): a miss or a named error, never a
// crash or a JSON type error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "autotune/tuning_record.h"
#include "cache/archive.h"
#include "cache/bounded_json.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "jit/error.h"
#include "jit/warmup.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

// 200,000 levels: what crashed the serializer, the tools and the tuner.
std::string nested(std::size_t depth, const std::string& inside = "1") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

class UntrustedJsonFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cujit_bounded_json_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void spit(const fs::path& p, const std::string& s) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
  }
  fs::path root_;
};

const std::string kKey(64, 'a');

}  // namespace

TEST(BoundedJson, AcceptsWhatCujitWritesAndCountsDepthOutsideStringsOnly) {
  EXPECT_EQ(parse_bounded_json(R"({"a": [1, {"b": "x"}]})", {1024}), json::parse(R"({"a": [1, {"b": "x"}]})"));
  EXPECT_EQ(parse_bounded_json(nested(64), {1024}), json::parse(nested(64)));
  // Brackets and escaped quotes inside strings are text, not nesting.
  const std::string in_string = "{\"s\": \"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"}";
  ASSERT_TRUE(parse_bounded_json(in_string, {4096}).has_value());
  EXPECT_FALSE(first_byte_deeper_than(in_string, 1).has_value());
}

TEST(BoundedJson, RefusesTooDeepTooLargeAndMalformedSayingWhereAndWhy) {
  std::string why;
  EXPECT_FALSE(parse_bounded_json(nested(65), {1024}, &why));
  EXPECT_NE(why.find("nested deeper than 64 levels at byte 65"), std::string::npos) << why;
  EXPECT_FALSE(parse_bounded_json(nested(200000), {1u << 20}, &why));
  EXPECT_NE(why.find("deeper"), std::string::npos) << why;
  EXPECT_FALSE(parse_bounded_json("{\"a\": " + nested(70, "{}") + "}", {1024}));
  EXPECT_FALSE(parse_bounded_json(std::string(2000, ' ') + "1", {1024}, &why));
  EXPECT_NE(why.find("2001 bytes, more than the 1024 accepted"), std::string::npos) << why;
  EXPECT_FALSE(parse_bounded_json("{\"a\": tru}", {1024}, &why));
  EXPECT_NE(why.find("column"), std::string::npos) << "the parse error's position: " << why;
  EXPECT_FALSE(parse_bounded_json("", {1024}));
}

TEST(BoundedJson, TypedFieldsSayAbsentOkOrWrongType) {
  const json o = {{"s", "x"}, {"n", 2.5}, {"i", 7}, {"null", nullptr}, {"big", std::uint64_t(1) << 63}};
  EXPECT_EQ(string_field(o, "s").value, "x");
  EXPECT_EQ(string_field(o, "missing").state, FieldState::absent);
  EXPECT_TRUE(string_field(o, "n").bad());
  EXPECT_TRUE(string_field(o, "null").bad());
  EXPECT_EQ(number_field(o, "n").value, 2.5);
  EXPECT_EQ(number_field(o, "i").value, 7.0);
  EXPECT_TRUE(number_field(o, "s").bad());
  EXPECT_TRUE(number_field(o, "null").bad());
  EXPECT_EQ(integer_field(o, "i").value, 7);
  EXPECT_TRUE(integer_field(o, "n").bad());
  EXPECT_TRUE(integer_field(o, "big").bad());
  EXPECT_EQ(string_field(json::array(), "s").state, FieldState::absent);
}

TEST(BoundedJson, OutputReplacesInvalidUtf8InsteadOfThrowing) {
  const json o = {{"dir", std::string("/tmp/caf\xe9/cache")}};
  EXPECT_THROW((void)o.dump(), json::exception);
  const std::string text = dump_for_output(o);
  EXPECT_EQ(json::parse(text)["dir"], "/tmp/caf\xef\xbf\xbd/cache");
}

// --- tuning records -------------------------------------------------------------

TEST_F(UntrustedJsonFiles, TuningRecordsNestedOrMistypedAreMissesAndVerifyNamesThem) {
  const json key = {{"family", "attention"}, {"arch", "sm_90a"}};
  const TuningDb db(root_);
  db.store(key, {{"winner", {{"bm", 64}}}, {"candidates", json::array()}});
  ASSERT_TRUE(db.load(key));
  const std::string deep_config = R"({"key": )" + key.dump() + R"(, "winner": {"bm": 64}, "candidates": [{"config": )" +
                                  nested(200000) + "}]}";
  spit(db.record_path(key), deep_config);
  EXPECT_FALSE(db.load(key)) << "a 200,000-deep config loads";
  // A tuning key nested 200,000 levels, named by the hash of its text: what
  // crashed verify and export.
  const std::string deep_key_text = nested(200000);
  const fs::path planted = root_ / "tuning" / (sha256_hex(deep_key_text) + ".json");
  spit(planted, R"({"key": )" + deep_key_text + "}");
  EXPECT_NE(tuning_record_problem(sha256_hex(deep_key_text), R"({"key": )" + deep_key_text + "}").find("deeper"),
            std::string::npos);
  const VerifyReport report = verify_cache(root_, /*remove_bad=*/false);
  EXPECT_EQ(report.checked_tuning, 2u);
  ASSERT_EQ(report.bad.size(), 2u);
  for (const BadEntry& bad : report.bad) EXPECT_NE(bad.reason.find("deeper"), std::string::npos) << bad.reason;
  const ExportReport exported = export_archive(root_, root_ / "out.cujit");
  EXPECT_EQ(exported.tuning_records, 0u);
  EXPECT_EQ(exported.skipped.size(), 2u);
  EXPECT_NO_THROW((void)cache_stats(root_));
  // verify can now clean what it could not read before.
  EXPECT_EQ(verify_cache(root_, /*remove_bad=*/true).bad.size(), 2u);
  EXPECT_FALSE(fs::exists(planted));
}

TEST_F(UntrustedJsonFiles, NonFiniteTimingsRoundTripAsErrorsThroughTheTuningDb) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<jit::autotune::TimedCandidate> candidates(3);
  candidates[0] = {{{"bm", 64}}, "a", 10.0, ""};
  candidates[1] = {{{"bm", 128}}, "b", inf, ""};
  candidates[2] = {{{"bm", 192}}, "c", std::nan(""), ""};
  const json key = {{"family", "attention"}, {"arch", "sm_80"}};
  const TuningDb db(root_);
  db.store(key, jit::autotune::make_record(candidates, candidates[0].config));
  const std::optional<json> record = db.load(key);
  ASSERT_TRUE(record) << "a record with an infinite timing does not load back";
  const auto back = jit::autotune::record_candidates(*record);
  ASSERT_TRUE(back && back->size() == 3);
  EXPECT_EQ((*back)[0].median_us, 10.0);
  EXPECT_TRUE((*back)[0].error.empty());
  EXPECT_NE((*back)[1].error.find("not finite"), std::string::npos) << (*back)[1].error;
  EXPECT_NE((*back)[2].error.find("not finite"), std::string::npos) << (*back)[2].error;
}

// --- cubin metadata ------------------------------------------------------------

TEST_F(UntrustedJsonFiles, CubinMetadataOfTheWrongTypeOrNestedIsABadEntryAndListingWorks) {
  const std::string payload = "\x7f" "ELF payload";
  const json good = {{"variant", "attn_v"}, {"arch", "sm_80"}, {"family", "attention"}, {"lowered_name", "k"}};
  ASSERT_TRUE(CubinStore::decode(kKey, CubinStore::encode(kKey, payload, good)));
  for (const char* field : {"variant", "arch", "family", "lowered_name"}) {
    json meta = good;
    meta[field] = 5;
    EXPECT_FALSE(CubinStore::decode(kKey, CubinStore::encode(kKey, payload, meta))) << field << ": 5";
  }
  json deep = good;
  deep["extra"] = json::parse(nested(65));
  EXPECT_FALSE(CubinStore::decode(kKey, CubinStore::encode(kKey, payload, deep)));

  // Planted in a cache: ls and stats list it as invalid instead of exiting.
  json mistyped = good;
  mistyped["variant"] = 5;
  spit(CubinStore(root_).entry_path(kKey), CubinStore::encode(kKey, payload, mistyped));
  std::vector<CubinInfo> listed;
  ASSERT_NO_THROW(listed = list_cubins(root_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].valid);
  CacheStats stats;
  ASSERT_NO_THROW(stats = cache_stats(root_));
  EXPECT_EQ(stats.invalid_cubins, 1u);
  EXPECT_NE(cubin_entry_problem(kKey, CubinStore::encode(kKey, payload, mistyped)), "");
}

// --- warm-up manifests ------------------------------------------------------------

TEST(BoundedJsonManifest, NestedManifestIsAnInvalidArgumentNotACrash) {
  for (const std::string& text : {nested(200000), "{\"shapes\": [" + nested(100, "{}") + "]}"}) {
    try {
      (void)jit::parse_attention_manifest(text);
      ADD_FAILURE() << "a nested manifest was accepted";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument);
    }
  }
}
