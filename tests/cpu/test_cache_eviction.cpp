// Tests for cache/eviction and cache/cache_scan: the CUJIT_CACHE_MAX_BYTES
// knob, least-recently-used eviction over a directory, and its behaviour when
// other processes remove, touch or write files at the same time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/eviction.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

constexpr std::int64_t kSec = 1'000'000'000;
// A fixed past time, so that mtimes set by the tests are far from "now".
constexpr std::int64_t kT0 = std::int64_t{1'700'000'000} * kSec;

void set_mtime(const fs::path& p, std::int64_t ns) {
  struct timespec times[2];
  times[0].tv_sec = ns / kSec;
  times[0].tv_nsec = ns % kSec;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << p;
}

std::int64_t mtime_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return -1;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * kSec + st.st_mtim.tv_nsec;
}

using cujit_test::spit;

class EvictionTest : public cujit_test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root_ = tmp_;
  }

  // A cubin entry of about `payload` bytes whose last use is `mtime`.
  fs::path add_cubin(const std::string& name, std::size_t payload, std::int64_t mtime) {
    const std::string key = sha256_hex(name);
    CubinStore store(root_);
    store.store(key, jit::test::fake_cubin("sm_90a", std::string(payload, 'x')), {{"variant", name}, {"arch", "sm_90a"}});
    const fs::path p = store.entry_path(key);
    set_mtime(p, mtime);
    return p;
  }

  fs::path add_tuning(const std::string& name, std::int64_t mtime) {
    const json key = {{"family", "test"}, {"name", name}, {"arch", "sm_89"}};
    TuningDb db(root_);
    db.store(key, {{"winner", {{"bm", 64}}}});
    const fs::path p = db.record_path(key);
    set_mtime(p, mtime);
    return p;
  }

  std::uint64_t disk_total() const { return scan_cache(root_).total_bytes; }

  fs::path root_;
};

}  // namespace

// ---------------------------------------------------------------- sizes and the knob

TEST(ByteSize, AcceptedSpellings) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("123"), 123u);
  EXPECT_EQ(parse_byte_size("123B"), 123u);
  EXPECT_EQ(parse_byte_size("1K"), 1024u);
  EXPECT_EQ(parse_byte_size("2k"), 2048u);
  EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("512MB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("4G"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("4g"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("3T"), 3ull << 40);
  EXPECT_EQ(parse_byte_size("18446744073709551615"), UINT64_MAX);
}

TEST(ByteSize, RejectedSpellings) {
  for (const char* bad : {"", "G", "abc", "-1", "+1", "1.5G", " 1G", "1G ", "1 G", "1X", "1GG", "1Gi", "1GiBs",
                          "0x10", "18446744073709551616", "17179869184G", "16777216T"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(CacheMaxBytesKnob, DefaultAndValues) {
  EXPECT_EQ(jit::detail::parse_cache_max_bytes(nullptr), 4ull << 30);  // unset: the default
  EXPECT_EQ(jit::detail::parse_cache_max_bytes(""), 4ull << 30);
  EXPECT_EQ(jit::detail::parse_cache_max_bytes("123"), 123u);
  EXPECT_EQ(jit::detail::parse_cache_max_bytes("512M"), 512ull << 20);
  EXPECT_EQ(jit::detail::parse_cache_max_bytes("4G"), 4ull << 30);
  EXPECT_EQ(jit::detail::Knobs{}.cache_max_bytes, 4ull << 30);
}

// A size too large for 64 bits is out of range, not "not a size"; a
// misspelled one is not a size.
TEST(CacheMaxBytesKnob, TooLargeIsOutOfRange) {
  const auto message = [](const char* value) -> std::string {
    try {
      jit::detail::parse_cache_max_bytes(value);
    } catch (const jit::Error& e) {
      return e.what();
    }
    return "accepted";
  };
  for (const char* huge : {"99999999999999999999", "18446744073709551616", "17179869184G", "16777216TiB"}) {
    EXPECT_NE(message(huge).find("out of range"), std::string::npos) << message(huge);
  }
  for (const char* bad : {"4Q", "abc", "1.5G", "99999999999999999999Q"}) {
    EXPECT_NE(message(bad).find("not a size"), std::string::npos) << message(bad);
  }
}

TEST(CacheMaxBytesKnob, InvalidValuesNameTheKnob) {
  for (const char* bad : {"abc", "0", "-5", "4 G", "1.5G", "4Q", "99999999999999999999"}) {
    try {
      jit::detail::parse_cache_max_bytes(bad);
      ADD_FAILURE() << "CUJIT_CACHE_MAX_BYTES='" << bad << "' was accepted";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("CUJIT_CACHE_MAX_BYTES"), std::string::npos) << message;
      EXPECT_NE(message.find(bad), std::string::npos) << message;
    }
  }
}

TEST(EvictionTarget, NinetyPercent) {
  EXPECT_EQ(eviction_target(1000), 900u);
  EXPECT_EQ(eviction_target(0), 0u);
  EXPECT_EQ(eviction_target(4ull << 30), (4ull << 30) - (4ull << 30) / 10);
}

// ---------------------------------------------------------------- paths

TEST(CachePaths, Classification) {
  const std::string key = sha256_hex("k");
  EXPECT_EQ(classify_relative_path("cubin/" + key.substr(0, 2) + "/" + key + ".cubin"), CacheFileKind::cubin);
  EXPECT_EQ(classify_relative_path("tuning/" + key + ".json"), CacheFileKind::tuning);
  EXPECT_EQ(classify_relative_path("cubin/" + key.substr(0, 2) + "/." + key + ".cubin.tmp.12.00ff"),
            CacheFileKind::temp);
  EXPECT_EQ(classify_relative_path("tuning/." + key + ".json.tmp.12.00ff"), CacheFileKind::temp);
  // Wrong shard, upper case, wrong suffix, extra components, traversal.
  EXPECT_EQ(classify_relative_path("cubin/zz/" + key + ".cubin"), CacheFileKind::other);
  std::string upper = key;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  EXPECT_EQ(classify_relative_path("tuning/" + upper + ".json"), CacheFileKind::other);
  EXPECT_EQ(classify_relative_path("tuning/" + key + ".cubin"), CacheFileKind::other);
  EXPECT_EQ(classify_relative_path("tuning/x/" + key + ".json"), CacheFileKind::other);
  EXPECT_EQ(classify_relative_path("cubin/" + key.substr(0, 2) + "/../" + key + ".cubin"), CacheFileKind::other);
  EXPECT_EQ(classify_relative_path("/tuning/" + key + ".json"), CacheFileKind::other);
  EXPECT_EQ(classify_relative_path("../tuning/" + key + ".json"), CacheFileKind::other);
  EXPECT_EQ(entry_hex_name("tuning/" + key + ".json"), key);
  EXPECT_EQ(entry_hex_name("tuning/../" + key + ".json"), "");
}

// ---------------------------------------------------------------- eviction

TEST_F(EvictionTest, UnderTheBoundNothingHappens) {
  add_cubin("a", 4000, kT0);
  add_cubin("b", 4000, kT0 + kSec);
  add_tuning("t", kT0);
  const std::uint64_t total = disk_total();
  const EvictionReport r = evict_lru(root_, total);  // exactly at the bound is not over it
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(r.removed_cubins + r.removed_tuning, 0u);
  EXPECT_EQ(r.bytes_before, total);
  EXPECT_EQ(disk_total(), total);
  EXPECT_FALSE(fs::exists(root_ / ".eviction.lock"));  // the common case creates nothing
}

TEST_F(EvictionTest, RemovesLeastRecentlyUsedFirstAndLeavesTuningRecords) {
  // Last uses deliberately not in name or creation order.
  const std::vector<std::pair<std::string, std::int64_t>> spec = {
      {"e", kT0 + 5 * kSec}, {"a", kT0 + 3 * kSec}, {"d", kT0 + 1 * kSec}, {"b", kT0 + 4 * kSec}, {"c", kT0 + 2 * kSec}};
  std::vector<std::pair<std::int64_t, fs::path>> by_age;
  for (const auto& [name, t] : spec) by_age.emplace_back(t, add_cubin(name, 10000, t));
  std::sort(by_age.begin(), by_age.end());
  const fs::path t1 = add_tuning("t1", kT0);  // older than every cubin: still kept
  const fs::path t2 = add_tuning("t2", kT0 + 10 * kSec);

  const std::uint64_t total = disk_total();
  const std::uint64_t cubin_size = fs::file_size(by_age[0].second);
  // Bound: the total minus a bit more than one cubin. Reaching 90% of it must
  // take exactly the number of oldest cubins computed here.
  const std::uint64_t max = total - cubin_size - 100;
  const std::uint64_t target = eviction_target(max);
  std::size_t expect_removed = 0;
  for (std::uint64_t t = total; t > target; t -= cubin_size) ++expect_removed;
  ASSERT_GE(expect_removed, 2u);
  ASSERT_LT(expect_removed, by_age.size());

  const EvictionReport r = evict_lru(root_, max);
  EXPECT_TRUE(r.evicted);
  EXPECT_EQ(r.removed_cubins, expect_removed);
  EXPECT_EQ(r.removed_tuning, 0u);
  EXPECT_EQ(r.bytes_before, total);
  EXPECT_LE(r.bytes_after, target);
  EXPECT_LE(disk_total(), target);
  EXPECT_EQ(disk_total(), r.bytes_after);
  for (std::size_t i = 0; i < by_age.size(); ++i) {
    EXPECT_EQ(fs::exists(by_age[i].second), i >= expect_removed) << "cubin #" << i << " by age";
  }
  EXPECT_TRUE(fs::exists(t1));
  EXPECT_TRUE(fs::exists(t2));
}

TEST_F(EvictionTest, TouchOnHitMakesAnEntryRecent) {
  const fs::path oldest = add_cubin("oldest", 10000, kT0);
  const fs::path middle = add_cubin("middle", 10000, kT0 + kSec);
  const fs::path newest = add_cubin("newest", 10000, kT0 + 2 * kSec);
  ASSERT_TRUE(touch_entry(oldest));  // a cache hit: last use is now
  EXPECT_GT(mtime_of(oldest), kT0 + 2 * kSec);
  EXPECT_FALSE(touch_entry(root_ / "cubin" / "no-such-entry"));

  // Room for two entries: the least recently used one goes.
  const std::uint64_t max = disk_total() - 1;
  const EvictionReport r = evict_lru(root_, max);
  EXPECT_EQ(r.removed_cubins, 1u);
  EXPECT_TRUE(fs::exists(oldest));
  EXPECT_FALSE(fs::exists(middle));
  EXPECT_TRUE(fs::exists(newest));
}

TEST_F(EvictionTest, TuningRecordsGoOnlyWhenCubinsCannotMakeRoom) {
  const fs::path c1 = add_cubin("c1", 3000, kT0 + 5 * kSec);
  const fs::path c2 = add_cubin("c2", 3000, kT0 + 6 * kSec);
  const fs::path t_old = add_tuning("old", kT0);
  const fs::path t_new = add_tuning("new", kT0 + 9 * kSec);
  const std::uint64_t tuning_bytes = fs::file_size(t_old) + fs::file_size(t_new);

  // A bound that fits the tuning records but only one of them with any cubin:
  // every cubin goes, then the older tuning record.
  const std::uint64_t max = fs::file_size(t_new) + fs::file_size(t_old) / 2;
  ASSERT_LT(eviction_target(max), tuning_bytes);
  const EvictionReport r = evict_lru(root_, max);
  EXPECT_EQ(r.removed_cubins, 2u);
  EXPECT_EQ(r.removed_tuning, 1u);
  EXPECT_FALSE(fs::exists(c1));
  EXPECT_FALSE(fs::exists(c2));
  EXPECT_FALSE(fs::exists(t_old));
  EXPECT_TRUE(fs::exists(t_new));
  EXPECT_LE(disk_total(), eviction_target(max));
}

TEST_F(EvictionTest, KeptEntrySurvivesEvenWhenOldest) {
  const fs::path kept = add_cubin("kept", 10000, kT0);
  const fs::path other = add_cubin("other", 10000, kT0 + kSec);
  EvictionOptions options;
  options.keep.push_back(kept);
  const EvictionReport r = evict_lru(root_, 1000, options);
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_FALSE(fs::exists(other));
  EXPECT_EQ(r.removed_cubins, 1u);
}

TEST_F(EvictionTest, ZeroBoundRemovesEveryCubinButNotStrayFiles) {
  add_cubin("a", 100, kT0);
  add_cubin("b", 100, kT0);
  const fs::path stray = root_ / "cubin" / "notes.txt";
  spit(stray, "not an entry");
  const fs::path repro = root_ / "repro" / "x";
  fs::create_directories(repro.parent_path());
  spit(repro, std::string(5000, 'r'));  // outside cubin/ and tuning/: not counted
  const EvictionReport r = evict_lru(root_, 0);
  EXPECT_EQ(r.removed_cubins, 2u);
  EXPECT_TRUE(fs::exists(stray));
  EXPECT_TRUE(fs::exists(repro));
  EXPECT_EQ(disk_total(), fs::file_size(stray));
}

TEST_F(EvictionTest, StaleTempFilesGoYoungOnesStay) {
  const fs::path entry = add_cubin("a", 1000, kT0);
  const fs::path shard = entry.parent_path();
  const fs::path young = shard / ("." + entry.filename().string() + ".tmp.4242.0123456789abcdef");
  const fs::path old = shard / ("." + entry.filename().string() + ".tmp.4243.fedcba9876543210");
  const fs::path old_tuning = root_ / "tuning" / ("." + sha256_hex("t") + ".json.tmp.1.ab");
  fs::create_directories(root_ / "tuning");
  spit(young, std::string(2000, 'y'));
  spit(old, std::string(2000, 'o'));
  spit(old_tuning, "{}");
  const std::int64_t now = now_ns();
  set_mtime(young, now - 59 * 60 * kSec);  // 59 minutes: a slow but live writer
  set_mtime(old, now - 61 * 60 * kSec);
  set_mtime(old_tuning, now - 24 * 3600 * kSec);

  // Far under the bound: only the stale temp files are removed.
  const EvictionReport r = evict_lru(root_, 1ull << 40);
  EXPECT_EQ(r.removed_temps, 2u);
  EXPECT_EQ(r.removed_cubins, 0u);
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_FALSE(fs::exists(old_tuning));
  EXPECT_TRUE(fs::exists(entry));

  // Over the bound: entries go, the live writer's temp file still stays.
  const EvictionReport r2 = evict_lru(root_, 10);
  EXPECT_EQ(r2.removed_cubins, 1u);
  EXPECT_TRUE(fs::exists(young));
}

TEST_F(EvictionTest, ScanToleratesFilesVanishing) {
  std::vector<fs::path> paths;
  for (int i = 0; i < 8; ++i) paths.push_back(add_cubin("v" + std::to_string(i), 500, kT0 + i * kSec));
  add_tuning("t", kT0);
  // Another process removes every other entry just as the scan reaches it.
  std::set<fs::path> removed;
  int n = 0;
  const CacheScan scan = scan_cache(root_, [&](const fs::path& p) {
    if (p.extension() == ".cubin" && (n++ % 2 == 0)) {
      fs::remove(p);
      removed.insert(p);
    }
  });
  EXPECT_EQ(removed.size(), 4u);
  std::size_t cubins = 0;
  for (const CacheFile& f : scan.files) {
    EXPECT_EQ(removed.count(f.path), 0u) << f.relative;
    if (f.kind == CacheFileKind::cubin) ++cubins;
  }
  EXPECT_EQ(cubins, 4u);
  EXPECT_EQ(scan.total_bytes, disk_total());

  // A missing cache directory is an empty one.
  EXPECT_TRUE(scan_cache(root_ / "nope").files.empty());
  EXPECT_FALSE(evict_lru(root_ / "nope", 0).evicted);
}

TEST_F(EvictionTest, StaleScanToleratesVanishedAndTouchedEntries) {
  const fs::path a = add_cubin("a", 10000, kT0);
  const fs::path b = add_cubin("b", 10000, kT0 + kSec);
  const fs::path c = add_cubin("c", 10000, kT0 + 2 * kSec);
  const fs::path d = add_cubin("d", 10000, kT0 + 3 * kSec);
  const CacheScan scan = scan_cache(root_);
  fs::remove(a);                 // evicted by another process meanwhile
  ASSERT_TRUE(touch_entry(b));   // a hit in another process: now recent, must stay
  const std::uint64_t entry = fs::file_size(c);

  // Room for two entries out of four.
  const EvictionReport r = evict_from_scan(scan, scan.total_bytes - entry - 1);
  EXPECT_EQ(r.vanished, 1u);
  EXPECT_EQ(r.skipped_changed, 1u);
  EXPECT_EQ(r.removed_cubins, 1u);
  EXPECT_TRUE(fs::exists(b));
  EXPECT_FALSE(fs::exists(c));
  EXPECT_TRUE(fs::exists(d));
}

TEST_F(EvictionTest, RewrittenEntryIsNotRemoved) {
  const fs::path a = add_cubin("a", 10000, kT0);
  const CacheScan scan = scan_cache(root_);
  // Another process replaces the entry (new inode) with the same mtime.
  add_cubin("a", 10000, kT0);
  const EvictionReport r = evict_from_scan(scan, 0);
  EXPECT_EQ(r.skipped_changed, 1u);
  EXPECT_TRUE(fs::exists(a));
}

TEST_F(EvictionTest, BusyLockMeansAnotherProcessIsEvicting) {
  const fs::path a = add_cubin("a", 10000, kT0);
  const int fd = ::open((root_ / ".eviction.lock").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const EvictionReport busy = evict_lru(root_, 0);
  EXPECT_TRUE(busy.lock_busy);
  EXPECT_TRUE(fs::exists(a));
  ::close(fd);
  const EvictionReport done = evict_lru(root_, 0);
  EXPECT_FALSE(done.lock_busy);
  EXPECT_EQ(done.removed_cubins, 1u);
  EXPECT_FALSE(fs::exists(a));
}

TEST_F(EvictionTest, ConcurrentReadersSeeWholeEntriesOrMisses) {
  // A reader holding the file open keeps reading it whole after eviction;
  // a later load is a miss, never a partial entry.
  const std::string key = sha256_hex("r");
  CubinStore store(root_);
  store.store(key, jit::test::fake_cubin("sm_80", std::string(50000, 'p')), {{"arch", "sm_80"}});
  const int fd = ::open(store.entry_path(key).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  evict_lru(root_, 0);
  EXPECT_FALSE(store.load(key).has_value());
  std::string bytes;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  ASSERT_TRUE(CubinStore::decode(key, bytes).has_value());
  EXPECT_EQ(CubinStore::decode(key, bytes)->payload, jit::test::fake_cubin("sm_80", std::string(50000, 'p')));
}
