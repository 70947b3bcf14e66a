// Tests for cache/tuning_db.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cache/cache_error.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

using TuningDbTest = cujit_test::TempDirTest;

using cujit_test::spit;

const json kKey = {{"op", "attn_fwd"}, {"head_dim", 128}, {"causal", true}, {"arch", "sm_90a"}};

}  // namespace

TEST_F(TuningDbTest, RecordPathLayout) {
  TuningDb db(tmp_);
  EXPECT_EQ(db.record_path(kKey), tmp_ / "tuning" / (sha256_hex(kKey.dump()) + ".json"));
  EXPECT_NE(db.record_path(kKey), db.record_path(json{{"op", "attn_bwd"}}));
}

TEST_F(TuningDbTest, RoundTrip) {
  TuningDb db(tmp_);
  EXPECT_FALSE(db.load(kKey).has_value());
  const json record = {{"block_m", 128}, {"block_n", 64}, {"ms", 0.125}, {"stages", {2, 3}}};
  db.store(kKey, record);
  auto got = db.load(kKey);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ((*got)["key"], kKey);
  EXPECT_EQ((*got)["block_m"], 128);
  EXPECT_EQ((*got)["ms"], 0.125);
  EXPECT_EQ((*got)["stages"], json({2, 3}));
  json expected = record;
  expected["key"] = kKey;
  EXPECT_EQ(*got, expected);

  // Pretty-printed on disk.
  std::ifstream in(db.record_path(kKey));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find('\n'), std::string::npos);
  EXPECT_EQ(json::parse(text), expected);

  // Overwrite.
  db.store(kKey, {{"block_m", 64}});
  EXPECT_EQ(db.load(kKey).value()["block_m"], 64);
  EXPECT_FALSE(db.load(json{{"op", "other"}}).has_value());
}

TEST_F(TuningDbTest, MalformedJsonIsAMiss) {
  TuningDb db(tmp_);
  db.store(kKey, {{"x", 1}});
  const fs::path p = db.record_path(kKey);
  for (const std::string& bad :
       {std::string(""), std::string("{"), std::string("{\"key\": "), std::string("[1, 2]"),
        std::string("null"), std::string("\xff\xfe"), std::string("{\"x\": 1} trailing"),
        std::string(50000, '[')}) {
    spit(p, bad);
    EXPECT_FALSE(db.load(kKey).has_value()) << bad.substr(0, 20);
  }
}

TEST_F(TuningDbTest, KeyMismatchIsAMiss) {
  TuningDb db(tmp_);
  db.store(kKey, {{"x", 1}});
  const fs::path p = db.record_path(kKey);
  json other = {{"x", 1}, {"key", {{"op", "attn_bwd"}}}};
  spit(p, other.dump());
  EXPECT_FALSE(db.load(kKey).has_value());
  spit(p, json({{"x", 1}}).dump());  // no key at all
  EXPECT_FALSE(db.load(kKey).has_value());
}

TEST_F(TuningDbTest, SymlinkIsNotFollowed) {
  TuningDb db(tmp_);
  db.store(kKey, {{"x", 1}});
  const fs::path p = db.record_path(kKey);
  const fs::path target = tmp_ / "planted.json";
  json planted = {{"x", 2}, {"key", kKey}};
  spit(target, planted.dump());
  fs::remove(p);
  fs::create_symlink(target, p);
  EXPECT_FALSE(db.load(kKey).has_value());
  db.store(kKey, {{"x", 3}});
  EXPECT_FALSE(fs::is_symlink(p));
  EXPECT_EQ(db.load(kKey).value()["x"], 3);
  std::ifstream in(target);
  EXPECT_EQ(json::parse(in), planted);
}

TEST_F(TuningDbTest, NonObjectRecordThrows) {
  TuningDb db(tmp_);
  EXPECT_THROW(db.store(kKey, json::array({1, 2})), CacheError);
}
