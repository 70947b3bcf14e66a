// Tests for cache/cubin_store: entry encoding, corruption handling, symlinks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/cache_error.h"
#include "cache/cubin_store.h"
#include "cache/sha256.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

using CubinStoreTest = cujit_test::TempDirTest;

const std::string kKey = sha256_hex("variant-a");
const std::string kOtherKey = sha256_hex("variant-b");
const json kArch = {{"arch", "sm_90a"}};

// A payload the store accepts: a CUDA ELF header for sm_90a, then `body`.
std::string cubin(const std::string& body) { return jit::test::fake_cubin("sm_90a", body); }

using cujit_test::slurp;
using cujit_test::spit;

// Rebuilds the trailing checksum so a test can reach the checks after it.
std::string reseal(std::string bytes) {
  bytes.resize(bytes.size() - 32);
  const Digest d = sha256(bytes);
  bytes.append(reinterpret_cast<const char*>(d.data()), d.size());
  return bytes;
}

}  // namespace

TEST(CubinEncoding, RoundTrip) {
  const std::string payload("\x7f" "ELF\0\1\2\xff payload", 15);
  const json meta = {{"variant", "fwd_d128"}, {"arch", "sm_90a"}, {"regs", 128}};
  const std::string bytes = CubinStore::encode(kKey, payload, meta);
  EXPECT_EQ(bytes.substr(0, 8), std::string("CUJITCB\0", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]), kCubinFormatVersion);
  auto e = CubinStore::decode(kKey, bytes);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->payload, payload);
  EXPECT_EQ(e->meta["key"], kKey);
  EXPECT_EQ(e->meta["variant"], "fwd_d128");
  EXPECT_EQ(e->meta["arch"], "sm_90a");
  EXPECT_EQ(e->meta["regs"], 128);

  // Empty payload and null meta are fine too.
  auto e2 = CubinStore::decode(kKey, CubinStore::encode(kKey, "", json()));
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(e2->payload, "");
  EXPECT_EQ(e2->meta, json({{"key", kKey}}));
}

TEST(CubinEncoding, EveryTruncationIsAMiss) {
  const std::string bytes = CubinStore::encode(kKey, "some cubin bytes", {{"a", 1}});
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(CubinStore::decode(kKey, std::string_view(bytes).substr(0, n)).has_value())
        << "length " << n;
  }
  EXPECT_FALSE(CubinStore::decode(kKey, bytes + "x").has_value());  // trailing garbage
  EXPECT_TRUE(CubinStore::decode(kKey, bytes).has_value());
}

TEST(CubinEncoding, EveryFlippedByteIsAMiss) {
  const std::string bytes = CubinStore::encode(kKey, "cubin", {{"v", "x"}});
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ mask);
      EXPECT_FALSE(CubinStore::decode(kKey, bad).has_value()) << "byte " << i;
    }
  }
}

TEST(CubinEncoding, KeyMismatchIsAMiss) {
  const std::string bytes = CubinStore::encode(kKey, "cubin", json::object());
  EXPECT_FALSE(CubinStore::decode(kOtherKey, bytes).has_value());
  EXPECT_FALSE(CubinStore::decode("not a key", bytes).has_value());
}

TEST(CubinEncoding, WrongVersionOrMagicIsAMiss) {
  std::string bytes = CubinStore::encode(kKey, "cubin", json::object());
  std::string v2 = bytes;
  v2[8] = static_cast<char>(kCubinFormatVersion + 1);
  EXPECT_FALSE(CubinStore::decode(kKey, reseal(v2)).has_value());
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_FALSE(CubinStore::decode(kKey, reseal(magic)).has_value());
  EXPECT_TRUE(CubinStore::decode(kKey, reseal(bytes)).has_value());
}

TEST(CubinEncoding, HostileLengthsAndJsonAreMisses) {
  // Well-sealed entries whose fields lie: none may crash or allocate absurdly.
  auto build = [](std::uint64_t meta_len, const std::string& meta, std::uint64_t payload_len,
                  const std::string& payload) {
    std::string s("CUJITCB\0", 8);
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((kCubinFormatVersion >> (8 * i)) & 0xff));
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((meta_len >> (8 * i)) & 0xff));
    s += meta;
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((payload_len >> (8 * i)) & 0xff));
    s += payload;
    s.append(32, '\0');
    return reseal(s);
  };
  const std::string meta = json({{"key", kKey}}).dump();
  EXPECT_TRUE(CubinStore::decode(kKey, build(meta.size(), meta, 3, "abc")).has_value());
  EXPECT_FALSE(CubinStore::decode(kKey, build(UINT64_MAX, meta, 3, "abc")).has_value());
  EXPECT_FALSE(CubinStore::decode(kKey, build(UINT64_MAX - 20, meta, 3, "abc")).has_value());
  EXPECT_FALSE(CubinStore::decode(kKey, build(meta.size(), meta, UINT64_MAX, "abc")).has_value());
  EXPECT_FALSE(CubinStore::decode(kKey, build(meta.size(), meta, 2, "abc")).has_value());
  EXPECT_FALSE(CubinStore::decode(kKey, build(meta.size() + 1, meta, 3, "abc")).has_value());
  const std::string bad_json = "{\"key\": ";
  EXPECT_FALSE(CubinStore::decode(kKey, build(bad_json.size(), bad_json, 0, "")).has_value());
  const std::string not_object = "[1,2]";
  EXPECT_FALSE(CubinStore::decode(kKey, build(not_object.size(), not_object, 0, "")).has_value());
  const std::string num_key = "{\"key\": 5}";
  EXPECT_FALSE(CubinStore::decode(kKey, build(num_key.size(), num_key, 0, "")).has_value());
  const std::string bad_utf8 = "{\"key\": \"\xff\xfe\"}";
  EXPECT_FALSE(CubinStore::decode(kKey, build(bad_utf8.size(), bad_utf8, 0, "")).has_value());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(CubinStore::decode(kKey, build(deep.size(), deep, 0, "")).has_value());
}

TEST_F(CubinStoreTest, EntryPathLayout) {
  CubinStore store(tmp_);
  EXPECT_EQ(store.entry_path(kKey), tmp_ / "cubin" / kKey.substr(0, 2) / (kKey + ".cubin"));
}

TEST_F(CubinStoreTest, StoreLoadRoundTrip) {
  CubinStore store(tmp_);
  EXPECT_FALSE(store.load(kKey).has_value());
  store.store(kKey, cubin("payload-1"), kArch);
  auto e = store.load(kKey);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->payload, cubin("payload-1"));
  EXPECT_EQ(e->meta["arch"], "sm_90a");
  EXPECT_EQ(e->meta["key"], kKey);

  struct stat st {};
  ASSERT_EQ(::lstat(store.entry_path(kKey).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::lstat((tmp_ / "cubin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  store.store(kKey, cubin("payload-2"), kArch);  // overwrite
  EXPECT_EQ(store.load(kKey).value().payload, cubin("payload-2"));
  EXPECT_FALSE(store.load(kOtherKey).has_value());
}

TEST_F(CubinStoreTest, BadKeys) {
  CubinStore store(tmp_);
  const std::string upper = [] {
    std::string k = kKey;
    for (char& c : k) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return k;
  }();
  for (const std::string& bad : {std::string(""), std::string("abc"), upper,
                                 std::string("../") + kKey.substr(3), kKey + "0",
                                 kKey.substr(0, 63) + "g"}) {
    EXPECT_THROW(store.store(bad, cubin("x"), kArch), CacheError) << bad;
    EXPECT_FALSE(store.load(bad).has_value()) << bad;
  }
  EXPECT_FALSE(fs::exists(tmp_ / "cubin"));
}

TEST_F(CubinStoreTest, CorruptFileIsRemovedThenRewritten) {
  CubinStore store(tmp_);
  store.store(kKey, cubin("good"), kArch);
  const fs::path p = store.entry_path(kKey);
  std::string bytes = slurp(p);
  bytes[bytes.size() / 2] ^= 0x20;
  spit(p, bytes);
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_FALSE(fs::exists(p));

  spit(p, "garbage");
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_FALSE(fs::exists(p));

  // A valid entry for another key copied under this key's name is a miss too.
  store.store(kOtherKey, cubin("other"), kArch);
  fs::copy_file(store.entry_path(kOtherKey), p);
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_FALSE(fs::exists(p));

  store.store(kKey, cubin("fresh"), kArch);
  auto e = store.load(kKey);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->payload, cubin("fresh"));
}

TEST_F(CubinStoreTest, SymlinkAtEntryPathIsNotFollowed) {
  CubinStore store(tmp_);
  const fs::path p = store.entry_path(kKey);
  fs::create_directories(p.parent_path());
  ::chmod((tmp_ / "cubin").c_str(), 0700);
  ::chmod(p.parent_path().c_str(), 0700);

  // The link points at a perfectly valid entry: still not trusted.
  const fs::path target = tmp_ / "elsewhere.cubin";
  const std::string valid = CubinStore::encode(kKey, "planted", json::object());
  spit(target, valid);
  fs::create_symlink(target, p);
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_EQ(slurp(target), valid);

  store.store(kKey, cubin("real"), kArch);
  EXPECT_FALSE(fs::is_symlink(p));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p)));
  EXPECT_EQ(slurp(target), valid);  // the link target is untouched
  auto e = store.load(kKey);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->payload, cubin("real"));
}

TEST_F(CubinStoreTest, DanglingSymlinkAtEntryPath) {
  CubinStore store(tmp_);
  const fs::path p = store.entry_path(kKey);
  fs::create_directories(p.parent_path());
  fs::create_symlink(tmp_ / "nowhere", p);
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_FALSE(fs::exists(tmp_ / "nowhere"));
  store.store(kKey, cubin("ok"), kArch);
  EXPECT_FALSE(fs::exists(tmp_ / "nowhere"));
  EXPECT_EQ(store.load(kKey).value().payload, cubin("ok"));
}

TEST_F(CubinStoreTest, RefusesUnsafeCubinDir) {
  CubinStore store(tmp_);
  const fs::path sub = store.entry_path(kKey).parent_path();
  fs::create_directories(sub);
  ::chmod(sub.c_str(), 0777);
  EXPECT_THROW(store.store(kKey, cubin("x"), kArch), CacheError);
}
