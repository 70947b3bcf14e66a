// Tests for cache/archive (export/import of a whole cache) and cache/maintenance
// (what cujit-cache ls, stats, verify and clear run).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cache/archive.h"
#include "cache/cache_error.h"
#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

using cujit_test::slurp;
using cujit_test::spit;

// Relative path -> bytes of every file under cubin/ and tuning/.
std::map<std::string, std::string> contents(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const CacheFile& f : scan_cache(root).files) out[f.relative] = slurp(f.path);
  return out;
}

class ArchiveTest : public cujit_test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    a_ = tmp_ / "a";
    b_ = tmp_ / "b";  // import target: does not exist until an import succeeds
    archive_ = tmp_ / "cache.cujit";
  }

  std::string add_cubin(const fs::path& root, const std::string& name, const std::string& arch) {
    const std::string key = sha256_hex(name);
    std::string payload = jit::test::fake_cubin(arch, "cubin of " + name);
    for (int i = 0; i < 200; ++i) payload += static_cast<char>((i * 31 + name.size()) & 0xFF);
    CubinStore(root).store(key, payload,
                           {{"variant", "attn_" + name}, {"arch", arch}, {"family", "attention"}, {"lowered_name", "k"}});
    keys_.push_back(key);
    return key;
  }

  json add_tuning(const fs::path& root, const std::string& name, const std::string& arch) {
    const json key = {{"family", "attention"}, {"arch", arch}, {"name", name}, {"sq", 1024}};
    TuningDb(root).store(key, {{"winner", {{"bm", 128}, {"bn", 64}}}, {"candidates", json::array({1.5, 2.25})}});
    tune_keys_.push_back(key);
    return key;
  }

  void fill_a() {
    add_cubin(a_, "one", "sm_90a");
    add_cubin(a_, "two", "sm_90a");
    add_cubin(a_, "three", "sm_89");
    add_tuning(a_, "t1", "sm_90a");
    add_tuning(a_, "t2", "sm_89");
  }

  // Import must throw CacheError whose message contains `expect`, and write nothing.
  void expect_rejected(const fs::path& archive, const std::string& expect, const std::string& context) {
    try {
      import_archive(archive, b_);
      ADD_FAILURE() << context << ": the archive was accepted";
    } catch (const CacheError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << context << ": " << e.what();
    }
    EXPECT_FALSE(fs::exists(b_)) << context << ": something was written";
  }

  fs::path a_, b_, archive_;
  std::vector<std::string> keys_;
  std::vector<json> tune_keys_;
};

}  // namespace

// ---------------------------------------------------------------- archives

TEST_F(ArchiveTest, RoundTripIntoAnEmptyCache) {
  fill_a();
  const ExportReport ex = export_archive(a_, archive_);
  EXPECT_EQ(ex.cubins, 3u);
  EXPECT_EQ(ex.tuning_records, 2u);
  EXPECT_TRUE(ex.skipped.empty());
  EXPECT_EQ(ex.archive_bytes, fs::file_size(archive_));
  EXPECT_EQ(slurp(archive_).substr(0, 8), std::string("CUJITAR\0", 8));

  const ImportReport im = import_archive(archive_, b_);
  EXPECT_EQ(im.cubins, 3u);
  EXPECT_EQ(im.tuning_records, 2u);
  EXPECT_EQ(im.written, 5u);
  EXPECT_EQ(im.unchanged, 0u);
  EXPECT_EQ(im.bytes, ex.bytes);

  // Same files, same bytes; every entry decodes and equals A's.
  EXPECT_EQ(contents(b_), contents(a_));
  for (const std::string& key : keys_) {
    auto from_a = CubinStore(a_).load(key);
    auto from_b = CubinStore(b_).load(key);
    ASSERT_TRUE(from_a.has_value());
    ASSERT_TRUE(from_b.has_value()) << key;
    EXPECT_EQ(from_b->payload, from_a->payload);
    EXPECT_EQ(from_b->meta, from_a->meta);
  }
  for (const json& key : tune_keys_) {
    auto rec = TuningDb(b_).load(key);
    ASSERT_TRUE(rec.has_value()) << key.dump();
    EXPECT_EQ(*rec, *TuningDb(a_).load(key));
  }
  // The imported cache is private like any cache directory.
  struct stat st {};
  ASSERT_EQ(::stat(b_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(verify_cache(b_).bad.empty());

  // Importing again changes nothing.
  const ImportReport again = import_archive(archive_, b_);
  EXPECT_EQ(again.written, 0u);
  EXPECT_EQ(again.unchanged, 5u);
}

TEST_F(ArchiveTest, EmptyCacheMakesAnEmptyArchive) {
  const ExportReport ex = export_archive(a_, archive_);  // a_ does not even exist
  EXPECT_EQ(ex.cubins + ex.tuning_records, 0u);
  const ImportReport im = import_archive(archive_, b_);
  EXPECT_EQ(im.written, 0u);
  EXPECT_TRUE(contents(b_).empty());
}

TEST_F(ArchiveTest, ImportMergesIntoAnExistingCache) {
  fill_a();
  export_archive(a_, archive_);
  const std::string own = add_cubin(b_, "local-only", "sm_80");
  // A different (corrupt) file at one of the archive's paths is replaced.
  const fs::path clash = CubinStore(b_).entry_path(keys_[0]);
  fs::create_directories(clash.parent_path());
  spit(clash, "garbage");
  const ImportReport im = import_archive(archive_, b_);
  EXPECT_EQ(im.written, 5u);
  EXPECT_TRUE(CubinStore(b_).load(own).has_value());
  EXPECT_TRUE(CubinStore(b_).load(keys_[0]).has_value());
}

TEST_F(ArchiveTest, ExportLeavesOutBadEntries) {
  fill_a();
  const fs::path bad = CubinStore(a_).entry_path(keys_[1]);
  std::string bytes = slurp(bad);
  bytes[bytes.size() / 2] ^= 0x40;
  spit(bad, bytes);
  spit(TuningDb(a_).record_path(tune_keys_[0]), "{not json");
  const ExportReport ex = export_archive(a_, archive_);
  EXPECT_EQ(ex.cubins, 2u);
  EXPECT_EQ(ex.tuning_records, 1u);
  ASSERT_EQ(ex.skipped.size(), 2u);
  const ImportReport im = import_archive(archive_, b_);
  EXPECT_EQ(im.written, 3u);
  EXPECT_FALSE(fs::exists(CubinStore(b_).entry_path(keys_[1])));
}

TEST_F(ArchiveTest, EveryFlippedByteIsRejectedAndWritesNothing) {
  add_cubin(a_, "one", "sm_90a");
  add_tuning(a_, "t1", "sm_90a");
  export_archive(a_, archive_);
  const std::string good = slurp(archive_);
  ASSERT_GT(good.size(), 100u);
  const fs::path bad = tmp_ / "bad.cujit";
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] ^= 0x01;
    spit(bad, flipped);
    // The header names the problem; anything after it fails the checksum.
    const std::string expect = i < 8 ? "not a cujit cache archive" : i < 12 ? "format version" : "is corrupt";
    expect_rejected(bad, expect, "byte " + std::to_string(i));
    if (HasFailure()) break;
  }
}

TEST_F(ArchiveTest, EveryTruncationIsRejectedAndWritesNothing) {
  add_cubin(a_, "one", "sm_90a");
  add_tuning(a_, "t1", "sm_90a");
  export_archive(a_, archive_);
  const std::string good = slurp(archive_);
  const fs::path bad = tmp_ / "short.cujit";
  for (std::size_t n = 0; n < good.size(); ++n) {
    spit(bad, good.substr(0, n));
    expect_rejected(bad, n < 8 ? "not a cujit cache archive" : "archive", "first " + std::to_string(n) + " bytes");
    if (HasFailure()) break;
  }
  // Extra bytes after the checksum are corruption too.
  spit(bad, good + "x");
  expect_rejected(bad, "is corrupt", "one byte appended");
}

TEST_F(ArchiveTest, ResealedCorruptionNeverImportsWrongBytes) {
  // A flip inside the compressed data with the trailing checksum recomputed
  // (a forger, or a bug) is still caught by zstd's content checksum, the
  // manifest's SHA-256s or the entry checks; a flip that zstd can ignore (a
  // frame-header field that does not change the content) imports A's bytes.
  add_cubin(a_, "one", "sm_90a");
  add_tuning(a_, "t1", "sm_90a");
  export_archive(a_, archive_);
  const std::string good = slurp(archive_);
  const auto expected = contents(a_);
  const fs::path bad = tmp_ / "resealed.cujit";
  std::size_t rejected = 0;
  for (std::size_t i = 12; i + 32 < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] ^= 0x10;
    flipped.resize(flipped.size() - 32);
    const Digest d = sha256(flipped);
    flipped.append(reinterpret_cast<const char*>(d.data()), d.size());
    spit(bad, flipped);
    try {
      import_archive(bad, b_);
      EXPECT_EQ(contents(b_), expected) << "byte " << i;
    } catch (const CacheError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find("nothing was imported"), std::string::npos) << e.what();
      EXPECT_FALSE(fs::exists(b_)) << "byte " << i;
    }
    std::error_code ec;
    fs::remove_all(b_, ec);
    if (HasFailure()) break;
  }
  EXPECT_GT(rejected, (good.size() - 44) * 9 / 10);
}

TEST_F(ArchiveTest, LargeEntriesCrossStreamBuffers) {
  // Incompressible payloads larger than zstd's stream buffers.
  std::uint64_t x = 88172645463325252ull;
  for (int n = 0; n < 3; ++n) {
    std::string payload(700 * 1024 + n * 4099, '\0');
    for (char& c : payload) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x & 0xFF);
    }
    const std::string key = sha256_hex("big" + std::to_string(n));
    CubinStore(a_).store(key, jit::test::fake_cubin("sm_80", payload), {{"variant", "big"}, {"arch", "sm_80"}});
    keys_.push_back(key);
  }
  const ExportReport ex = export_archive(a_, archive_);
  EXPECT_EQ(ex.cubins, 3u);
  EXPECT_GT(ex.archive_bytes, 2u * 1024 * 1024);
  EXPECT_EQ(import_archive(archive_, b_).written, 3u);
  EXPECT_EQ(contents(b_), contents(a_));
}

TEST_F(ArchiveTest, WrongVersionIsNamed) {
  add_cubin(a_, "one", "sm_90a");
  export_archive(a_, archive_);
  std::string bytes = slurp(archive_);
  bytes[8] = 3;
  spit(archive_, bytes);
  expect_rejected(archive_, "format version 3", "version 3");
}

TEST_F(ArchiveTest, HostilePathsAreRejected) {
  const std::string key = sha256_hex("x");
  const std::string entry = CubinStore::encode(key, "payload", {{"variant", "v"}});
  std::string upper = key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::vector<std::string> hostile = {
      "../evil.cubin",
      "/tmp/evil.cubin",
      "cubin/" + key.substr(0, 2) + "/../../../evil.cubin",
      "cubin/../../" + key + ".cubin",
      "tuning/../../" + key + ".json",
      "./tuning/" + key + ".json",
      "cubin/zz/" + key + ".cubin",                       // wrong shard
      "cubin/" + key.substr(0, 2) + "/" + upper + ".cubin",  // not lowercase hex
      "cubin/" + key.substr(0, 2) + "/" + key + ".cubin/x",
      "cubin/" + key.substr(0, 2) + "//" + key + ".cubin",
      "tuning\\..\\" + key + ".json",
      "repro/" + key + ".json",
      "",
      std::string("cubin/") + key.substr(0, 2) + "/" + key + ".cubin" + std::string(1, '\0'),
  };
  for (const std::string& path : hostile) {
    spit(archive_, encode_archive({{path, entry}}));
    expect_rejected(archive_, "only cubin/xx/<64 hex>.cubin and tuning/<64 hex>.json are accepted", path);
  }
  // Nothing landed outside either.
  EXPECT_FALSE(fs::exists(tmp_ / "evil.cubin"));
  EXPECT_FALSE(fs::exists("/tmp/evil.cubin"));
  // A valid path after a hostile one is not written either.
  spit(archive_, encode_archive({{"cubin/" + key.substr(0, 2) + "/" + key + ".cubin", entry}, {"../evil", "x"}}));
  expect_rejected(archive_, "\"../evil\"", "valid then hostile");
}

TEST_F(ArchiveTest, ContentsAreCheckedBeforeAnythingIsWritten) {
  const std::string key = sha256_hex("x");
  const std::string other = sha256_hex("y");
  const std::string path = "cubin/" + key.substr(0, 2) + "/" + key + ".cubin";
  const std::string good = CubinStore::encode(key, jit::test::fake_cubin("sm_90a"), {{"arch", "sm_90a"}});
  // An entry encoded for another key, a broken entry, a bad tuning record: each
  // rejected even when a valid entry comes first.
  const std::string tuning_hex = sha256_hex("whatever");
  const std::vector<std::pair<std::vector<ArchiveFile>, std::string>> cases = {
      {{{path, CubinStore::encode(other, "payload", json::object())}}, "not a valid cubin entry"},
      {{{path, good.substr(0, good.size() - 1)}}, "not a valid cubin entry"},
      {{{"cubin/" + other.substr(0, 2) + "/" + other + ".cubin", CubinStore::encode(other, "p", {})},
        {path, "junk"}},
       "not a valid cubin entry"},
      {{{"tuning/" + tuning_hex + ".json", R"({"key": {"a": 1}})"}}, "not a valid tuning record"},
      {{{"tuning/" + tuning_hex + ".json", "[1, 2]"}}, "not a valid tuning record"},
      {{{path, good}, {path, good}}, "twice"},
  };
  for (const auto& [files, expect] : cases) {
    spit(archive_, encode_archive(files));
    expect_rejected(archive_, expect, expect);
  }
  // The same container with valid contents is accepted.
  spit(archive_, encode_archive({{path, good}}));
  EXPECT_EQ(import_archive(archive_, b_).cubins, 1u);
}

TEST_F(ArchiveTest, NotAnArchive) {
  spit(archive_, "hello, this is some other file with enough bytes to pass a size check");
  expect_rejected(archive_, "not a cujit cache archive", "text file");
  expect_rejected(tmp_ / "missing.cujit", "cannot open", "missing file");
  expect_rejected(tmp_, "not a regular file", "a directory");
}

TEST_F(ArchiveTest, ExportToAnUnwritablePlaceIsAnError) {
  fill_a();
  EXPECT_THROW(export_archive(a_, tmp_ / "no" / "such" / "dir" / "x.cujit"), CacheError);
  // No temp files are left beside a failed or successful export.
  export_archive(a_, archive_);
  for (const auto& e : fs::directory_iterator(tmp_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".body."), std::string::npos) << e.path();
  }
}

// ---------------------------------------------------------------- maintenance

TEST_F(ArchiveTest, VerifyRemovesCorruptedEntries) {
  fill_a();
  const fs::path flipped = CubinStore(a_).entry_path(keys_[0]);
  std::string bytes = slurp(flipped);
  bytes[bytes.size() / 2] ^= 0x01;
  spit(flipped, bytes);
  const fs::path truncated = CubinStore(a_).entry_path(keys_[1]);
  spit(truncated, slurp(truncated).substr(0, 20));
  const fs::path bad_record = TuningDb(a_).record_path(tune_keys_[0]);
  spit(bad_record, "{\"key\": 1}");
  const fs::path good = CubinStore(a_).entry_path(keys_[2]);

  // Without removal: reported, left in place.
  const VerifyReport dry = verify_cache(a_, /*remove_bad=*/false);
  EXPECT_EQ(dry.bad.size(), 3u);
  EXPECT_TRUE(fs::exists(flipped));

  const VerifyReport r = verify_cache(a_);
  EXPECT_EQ(r.checked_cubins, 3u);
  EXPECT_EQ(r.checked_tuning, 2u);
  ASSERT_EQ(r.bad.size(), 3u);
  std::map<std::string, std::string> reasons;
  for (const BadEntry& b : r.bad) {
    EXPECT_TRUE(b.removed) << b.relative;
    reasons[b.relative] = b.reason;
  }
  EXPECT_NE(reasons[fs::relative(flipped, a_).string()].find("checksum"), std::string::npos);
  EXPECT_NE(reasons[fs::relative(truncated, a_).string()].find("truncated"), std::string::npos);
  EXPECT_FALSE(reasons[fs::relative(bad_record, a_).string()].empty());
  EXPECT_FALSE(fs::exists(flipped));
  EXPECT_FALSE(fs::exists(truncated));
  EXPECT_FALSE(fs::exists(bad_record));
  EXPECT_TRUE(fs::exists(good));
  EXPECT_TRUE(CubinStore(a_).load(keys_[2]).has_value());
  EXPECT_TRUE(TuningDb(a_).load(tune_keys_[1]).has_value());

  EXPECT_TRUE(verify_cache(a_).bad.empty());
  EXPECT_EQ(to_json(r)["bad"].size(), 3u);
}

TEST_F(ArchiveTest, VerifyFlagsASymlinkAtAnEntryName) {
  fill_a();
  const fs::path entry = CubinStore(a_).entry_path(keys_[0]);
  const fs::path target = tmp_ / "elsewhere";
  spit(target, slurp(entry));
  fs::remove(entry);
  fs::create_symlink(target, entry);
  const VerifyReport r = verify_cache(a_);
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_TRUE(r.bad[0].removed);
  EXPECT_FALSE(fs::is_symlink(entry));
  EXPECT_TRUE(fs::exists(target));  // the link is removed, never what it points to
}

TEST_F(ArchiveTest, ListAndStats) {
  fill_a();
  const auto list = list_cubins(a_);
  ASSERT_EQ(list.size(), 3u);
  std::map<std::string, std::string> arch_of;
  for (const CubinInfo& c : list) {
    EXPECT_TRUE(c.valid);
    EXPECT_GT(c.bytes, 0u);
    EXPECT_GT(c.last_use_ns, 0);
    arch_of[c.variant] = c.arch;
  }
  EXPECT_EQ(arch_of["attn_one"], "sm_90a");
  EXPECT_EQ(arch_of["attn_three"], "sm_89");

  const CacheStats s = cache_stats(a_);
  EXPECT_EQ(s.cubins, 3u);
  EXPECT_EQ(s.tuning_records, 2u);
  EXPECT_EQ(s.invalid_cubins, 0u);
  EXPECT_EQ(s.by_arch.at("sm_90a").cubins, 2u);
  EXPECT_EQ(s.by_arch.at("sm_90a").tuning_records, 1u);
  EXPECT_EQ(s.by_arch.at("sm_89").cubins, 1u);
  EXPECT_EQ(s.total_bytes, s.cubin_bytes + s.tuning_bytes);
  EXPECT_EQ(to_json(s)["by_arch"]["sm_89"]["cubins"], 1);
}

TEST_F(ArchiveTest, ClearKeepsDirectoriesAndLiveWritersTempFiles) {
  fill_a();
  const fs::path shard = CubinStore(a_).entry_path(keys_[0]).parent_path();
  const fs::path live_temp = shard / ("." + keys_[0] + ".cubin.tmp.1.ab");
  spit(live_temp, "being written");
  const ClearReport r = clear_cache(a_);
  EXPECT_EQ(r.removed_files, 5u);
  EXPECT_EQ(r.kept_temp_files, 1u);
  EXPECT_TRUE(fs::exists(live_temp));
  EXPECT_TRUE(fs::is_directory(shard));
  EXPECT_TRUE(fs::is_directory(a_ / "tuning"));
  EXPECT_EQ(cache_stats(a_).cubins + cache_stats(a_).tuning_records, 0u);
}
