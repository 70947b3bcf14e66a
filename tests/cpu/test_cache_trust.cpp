// Tests for cache/trusted_dir and cache/cubin_image: every directory and file
// below the cache root is checked (owner, mode, no symlinks) on every access,
// and a cubin payload must be a CUDA ELF for its arch (issue 17, findings 1
// and 2). Foreign owners are faked with chown, so those tests need root.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cache/archive.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/cache_scan.h"
#include "cache/cubin_image.h"
#include "cache/cubin_store.h"
#include "cache/eviction.h"
#include "cache/file_lock.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "cache/trusted_dir.h"
#include "cache/tuning_db.h"
#include "jit/kernel_family.h"
#include "jit/nvrtc_compiler.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

constexpr uid_t kOtherUid = 12345;

using cujit_test::spit;

std::size_t count_files(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) ++n;
  }
  return n;
}

class CacheTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cujit_cache_trust_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ / "cache";
    outside_ = tmp_ / "outside";
    fs::create_directory(outside_);
    ensure_private_dir(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  void need_root() {
    if (::geteuid() != 0) GTEST_SKIP() << "faking another owner with chown needs root";
  }

  std::string store_cubin(const std::string& name, const std::string& arch = "sm_90a") {
    const std::string key = sha256_hex(name);
    CubinStore(root_).store(key, jit::test::fake_cubin(arch, name), {{"variant", name}, {"arch", arch}});
    return key;
  }
  fs::path shard(const std::string& key) const { return root_ / "cubin" / key.substr(0, 2); }
  fs::path entry(const std::string& key) const { return CubinStore(root_).entry_path(key); }

  // The sixteen entries an attacker's directory holds, valid for this cache.
  void fill_outside_like_a_cache() {
    const fs::path other = tmp_ / "other-cache";
    for (int i = 0; i < 16; ++i) {
      const std::string key = sha256_hex("outside" + std::to_string(i));
      CubinStore(other).store(key, jit::test::fake_cubin("sm_90a"), {{"arch", "sm_90a"}});
    }
    fs::copy(other / "cubin", outside_, fs::copy_options::recursive);
  }

  fs::path tmp_, root_, outside_;
};

}  // namespace

// ---------------------------------------------------------------- finding 1

TEST_F(CacheTrust, ForeignWorldWritableCubinDirIsNotServed) {
  need_root();
  const std::string key = store_cubin("a");
  ASSERT_TRUE(CubinStore(root_).load(key).has_value());
  ASSERT_EQ(::chown((root_ / "cubin").c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chmod((root_ / "cubin").c_str(), 0777), 0);
  // Observed before: a cache hit. Now a miss, a refused store, and listed as untrusted.
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());
  EXPECT_THROW(store_cubin("b"), UntrustedCacheDir);
  const CacheScan scan = scan_cache(root_);
  EXPECT_TRUE(scan.files.empty());
  ASSERT_EQ(scan.untrusted.size(), 1u);
  EXPECT_EQ(scan.untrusted[0].relative, "cubin");
  EXPECT_NE(scan.untrusted[0].reason.find("owned by uid 12345"), std::string::npos) << scan.untrusted[0].reason;
  const VerifyReport v = verify_cache(root_);
  ASSERT_EQ(v.bad.size(), 1u);
  EXPECT_EQ(v.bad[0].relative, "cubin/");
  EXPECT_FALSE(v.bad[0].removed);
  EXPECT_THROW(clear_cache(root_), UntrustedCacheDir);
  EXPECT_TRUE(fs::exists(entry(key)));  // clear removed nothing
}

TEST_F(CacheTrust, ForeignFileInWorldWritableShardIsNotServed) {
  need_root();
  const std::string key = store_cubin("a");
  ASSERT_EQ(::chmod(shard(key).c_str(), 0777), 0);
  ASSERT_EQ(::chown(entry(key).c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chmod(entry(key).c_str(), 0666), 0);
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());
  EXPECT_THROW(store_cubin("a"), UntrustedCacheDir);
}

TEST_F(CacheTrust, ForeignOrWritableFileInAPrivateShardIsABadEntry) {
  need_root();
  for (const auto& [uid, mode] : {std::pair<uid_t, mode_t>{kOtherUid, 0600}, {0, 0620}, {0, 0606}}) {
    const std::string key = store_cubin("a");
    ASSERT_EQ(::chown(entry(key).c_str(), uid, uid), 0);
    ASSERT_EQ(::chmod(entry(key).c_str(), mode), 0);
    const VerifyReport v = verify_cache(root_, /*remove_bad=*/false);
    ASSERT_EQ(v.bad.size(), 1u) << mode;
    EXPECT_NE(v.bad[0].reason.find("untrusted file"), std::string::npos) << v.bad[0].reason;
    EXPECT_FALSE(list_cubins(root_).at(0).valid);
    // A miss, and the file is dropped so the next store replaces it.
    EXPECT_FALSE(CubinStore(root_).load(key).has_value()) << mode;
    EXPECT_FALSE(fs::exists(entry(key)));
    store_cubin("a");
    EXPECT_TRUE(CubinStore(root_).load(key).has_value());
  }
}

TEST_F(CacheTrust, GroupWritableShardIsRefusedForLoadsAsForStores) {
  const std::string key = store_cubin("a");
  ASSERT_EQ(::chmod(shard(key).c_str(), 0775), 0);
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());  // observed before: served
  EXPECT_THROW(store_cubin("a"), UntrustedCacheDir);
  ASSERT_EQ(::chmod(shard(key).c_str(), 0700), 0);
  EXPECT_TRUE(CubinStore(root_).load(key).has_value());
}

TEST_F(CacheTrust, UntrustedTuningDirIsAMissAndRefusesStores) {
  const json key = {{"k", 1}};
  TuningDb(root_).store(key, {{"winner", 1}});
  ASSERT_TRUE(TuningDb(root_).load(key).has_value());
  ASSERT_EQ(::chmod((root_ / "tuning").c_str(), 0770), 0);
  EXPECT_FALSE(TuningDb(root_).load(key).has_value());
  EXPECT_THROW(TuningDb(root_).store(key, {{"winner", 2}}), UntrustedCacheDir);
}

TEST_F(CacheTrust, SymlinkedCubinDirIsNeverFollowed) {
  fill_outside_like_a_cache();
  const std::size_t planted = count_files(outside_);
  ASSERT_EQ(planted, 16u);
  fs::create_directory_symlink(outside_, root_ / "cubin");
  const std::string key = sha256_hex("outside0");
  // Load: a miss, though the target holds a valid entry for the key.
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());
  // Store: refused, nothing created through the link.
  EXPECT_THROW(store_cubin("new"), UntrustedCacheDir);
  // Listing: nothing listed, the subtree named.
  EXPECT_TRUE(list_cubins(root_).empty());
  ASSERT_EQ(scan_cache(root_).untrusted.size(), 1u);
  EXPECT_NE(scan_cache(root_).untrusted[0].reason.find("symbolic link"), std::string::npos);
  // Clear and prune: observed before, 16 files deleted in the target.
  EXPECT_THROW(clear_cache(root_), UntrustedCacheDir);
  evict_lru(root_, 0);
  // Import: observed before, 16 files written into the target.
  const fs::path source = tmp_ / "source";
  for (int i = 0; i < 4; ++i) {
    CubinStore(source).store(sha256_hex("import" + std::to_string(i)), jit::test::fake_cubin("sm_89"),
                             {{"arch", "sm_89"}});
  }
  export_archive(source, tmp_ / "a.cujit");
  EXPECT_THROW(import_archive(tmp_ / "a.cujit", root_), UntrustedCacheDir);
  EXPECT_EQ(count_files(outside_), planted);
}

TEST_F(CacheTrust, SymlinkedShardIsNeverFollowed) {
  const std::string key = store_cubin("a");
  fs::remove_all(shard(key));
  fs::create_directory_symlink(outside_, shard(key));
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());
  EXPECT_THROW(store_cubin("a"), UntrustedCacheDir);
  EXPECT_EQ(count_files(outside_), 0u);
  ASSERT_EQ(scan_cache(root_).untrusted.size(), 1u);
  EXPECT_EQ(scan_cache(root_).untrusted[0].relative, "cubin/" + key.substr(0, 2));
}

TEST_F(CacheTrust, LockDirectoryIsChecked) {
  const TrustedDir root = TrustedDir::open_root(root_, false);
  fs::create_directory_symlink(outside_, root_ / "locks");
  EXPECT_THROW(FileLock(*root.open_subdir("locks", true), "k.lock"), UntrustedCacheDir);
  EXPECT_EQ(count_files(outside_), 0u);
}

// A racer swapping tuning/ (or a shard) for a symlink with
// renameat2(RENAME_EXCHANGE) while records are written: each write goes to
// the directory that was checked, or fails; never to the link's target.
TEST_F(CacheTrust, DirectorySwappedForASymlinkDuringWritesRedirectsNothing) {
  TuningDb(root_).store({{"seed", 0}}, {{"winner", 0}});  // creates tuning/
  const fs::path link = tmp_ / "link";
  fs::create_directory_symlink(outside_, link);
  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  std::thread racer([&] {
    while (!stop) {
      if (::syscall(SYS_renameat2, AT_FDCWD, (root_ / "tuning").c_str(), AT_FDCWD, link.c_str(), 2 /*EXCHANGE*/) == 0) {
        ++swaps;
      }
    }
  });
  int stored = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    try {
      TuningDb(root_).store({{"i", i}}, {{"winner", i}});
      ++stored;
    } catch (const CacheError&) {
      ++refused;
    }
  }
  stop = true;
  racer.join();
  EXPECT_GT(swaps.load(), 0);
  EXPECT_GT(refused, 0);  // the store saw the symlink at least once...
  EXPECT_EQ(stored + refused, 2000);
  // ...and never wrote through it (before: records landed in the target).
  EXPECT_EQ(count_files(outside_), 0u);
}

TEST_F(CacheTrust, EnsurePrivateDirCreatesEachComponentWithoutFollowing) {
  // Components created by this call are opened O_NOFOLLOW: a symlink at the
  // last component is refused, and one below the root never gets a child.
  fs::create_directory_symlink(outside_, tmp_ / "linked");
  EXPECT_THROW(ensure_private_dir(tmp_ / "linked"), UntrustedCacheDir);
  const fs::path deep = tmp_ / "x" / "y" / "z";
  ensure_private_dir(deep);
  for (const fs::path& p : {tmp_ / "x", tmp_ / "x" / "y", deep}) {
    struct stat st {};
    ASSERT_EQ(::lstat(p.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u) << p;
  }
  EXPECT_EQ(count_files(outside_), 0u);
  EXPECT_TRUE(fs::is_empty(outside_));
}

// ---------------------------------------------------------------- finding 2: payloads

TEST(CubinImage, ArchNumbers) {
  EXPECT_EQ(sm_number("sm_90a"), 90u);
  EXPECT_EQ(sm_number("sm_90"), 90u);
  EXPECT_EQ(sm_number("sm_89"), 89u);
  EXPECT_EQ(sm_number("sm_100f"), 100u);
  for (const char* bad : {"", "sm_", "90", "sm_9x", "compute_90", "sm_90ab", "sm_123456"}) {
    EXPECT_FALSE(sm_number(bad).has_value()) << bad;
  }
}

TEST(CubinImage, RealNvrtcCubinsCarryTheirSm) {
  const jit::KernelSources sources{"k.cu", {{"k.cu", "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n"}}};
  for (const char* arch : {"sm_80", "sm_89", "sm_90a"}) {
    const jit::detail::CompiledBinary b = jit::detail::nvrtc_compile({&sources, "k", arch, {}});
    EXPECT_EQ(cubin_sm(b.cubin), sm_number(arch)) << arch;
    EXPECT_EQ(cubin_image_problem(b.cubin, arch), "") << arch;
    EXPECT_NE(cubin_image_problem(b.cubin, std::string(arch) == "sm_89" ? "sm_80" : "sm_89"), "") << arch;
  }
}

TEST(CubinImage, NotACubinIsNamed) {
  const std::string good = jit::test::fake_cubin("sm_90a");
  EXPECT_EQ(cubin_image_problem(good, "sm_90a"), "");
  EXPECT_NE(cubin_image_problem("NOT A CUBIN - attacker bytes", "sm_90a").find("not an ELF image"), std::string::npos);
  EXPECT_NE(cubin_image_problem(good, "sm_89").find("for sm_90, but its metadata says sm_89"), std::string::npos);
  std::string x86 = good;
  x86[18] = 62;  // EM_X86_64
  EXPECT_NE(cubin_image_problem(x86, "sm_90a").find("not CUDA"), std::string::npos);
  std::string elf32 = good;
  elf32[4] = 1;
  EXPECT_NE(cubin_image_problem(elf32, "sm_90a"), "");
  std::string tables = good;
  tables[60] = 5;  // five section headers...
  tables[58] = 64;
  tables[40] = 1;  // ...at offset 1, past the end
  EXPECT_NE(cubin_image_problem(tables, "sm_90a").find("outside"), std::string::npos);
  std::string abi = good;
  abi[8] = 9;
  EXPECT_NE(cubin_image_problem(abi, "sm_90a").find("ABI version 9"), std::string::npos);
  for (std::size_t n = 0; n < good.size(); ++n) EXPECT_NE(cubin_image_problem(good.substr(0, n), "sm_90a"), "") << n;
}

TEST_F(CacheTrust, NotACubinPayloadFailsStoreLoadVerifyAndImport) {
  const std::string key = sha256_hex("real key");
  const std::string attacker = "NOT A CUBIN - attacker bytes";
  const json meta = {{"variant", "attn"}, {"arch", "sm_90a"}, {"lowered_name", "k"}};
  EXPECT_THROW(CubinStore(root_).store(key, attacker, meta), CacheError);
  // Planted in the cache as a well-sealed entry: verify calls it bad, load misses.
  fs::create_directories(shard(key));
  ::chmod((root_ / "cubin").c_str(), 0700);
  ::chmod(shard(key).c_str(), 0700);
  spit(entry(key), CubinStore::encode(key, attacker, meta));
  ::chmod(entry(key).c_str(), 0600);
  const VerifyReport v = verify_cache(root_, /*remove_bad=*/false);
  ASSERT_EQ(v.bad.size(), 1u);
  EXPECT_NE(v.bad[0].reason.find("not an ELF image"), std::string::npos) << v.bad[0].reason;
  EXPECT_FALSE(list_cubins(root_).at(0).valid);
  EXPECT_FALSE(CubinStore(root_).load(key).has_value());
  // In an archive: import refuses it (observed before: "1 written").
  const fs::path archive = tmp_ / "evil.cujit";
  spit(archive, encode_archive({{"cubin/" + key.substr(0, 2) + "/" + key + ".cubin", CubinStore::encode(key, attacker, meta)}}));
  const fs::path fresh = tmp_ / "fresh";
  try {
    import_archive(archive, fresh);
    ADD_FAILURE() << "imported";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find("not an ELF image"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(fresh));
  // A real cubin for another SM under this arch is refused the same way.
  spit(archive, encode_archive({{"cubin/" + key.substr(0, 2) + "/" + key + ".cubin",
                                 CubinStore::encode(key, jit::test::fake_cubin("sm_89"), meta)}}));
  EXPECT_THROW(import_archive(archive, fresh), CacheError);
  EXPECT_FALSE(fs::exists(fresh));
}
