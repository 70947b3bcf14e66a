// Tests for read-only cache roots (CUJIT_CACHE_READONLY_DIRS) in the cache
// and autotune layers: the trust rules of TrustedDir::open_read_only_root,
// CubinStore and TuningDb serving from such a root without ever writing,
// locking, evicting or repairing it, the layered tuning-record lookup, and
// a tuning choice served from a read-only root with no writable one. The
// runtime's lookup order over real processes is in test_cache_faults.cpp.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "autotune/config_choice.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "cache/trusted_dir.h"
#include "cache/tuning_db.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_snapshot.h"

namespace {

namespace fs = std::filesystem;
using jit::Json;
using jit::cache::CubinStore;
using jit::cache::RootAccess;
using jit::cache::TrustedDir;
using jit::cache::TuningDb;
using jit::cache::UntrustedCacheDir;
using cujit_test::snapshot_tree;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The uid and gid of `nobody`, for a root owned by another user (needs root).
struct Nobody {
  uid_t uid = 65534;
  gid_t gid = 65534;
};
Nobody nobody() {
  Nobody n;
  if (const passwd* pw = ::getpwnam("nobody")) {
    n.uid = pw->pw_uid;
    n.gid = pw->pw_gid;
  }
  return n;
}

class ReadOnlyRoot : public cujit_test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root_ = tmp_ / "prewarmed";
    jit::cache::ensure_private_dir(root_);
  }
  // A valid cubin entry for `name`, written as a warm-up writes it; its key.
  std::string store_cubin(const fs::path& root, const std::string& name) {
    const std::string key = jit::cache::sha256_hex(name);
    CubinStore(root).store(key, jit::test::fake_cubin("sm_90a", name), {{"variant", name}, {"arch", "sm_90a"}});
    return key;
  }
  // Makes `root` look like an image layer: dirs 555, files 444.
  void seal(const fs::path& root) { cujit_test::chmod_tree(root, 0555, 0444); }
  void need_root() {
    if (::geteuid() != 0) GTEST_SKIP() << "faking another owner with chown needs root";
  }
  fs::path root_;
};

TEST_F(ReadOnlyRoot, HitIsServedAndNothingIsWritten) {
  const std::string key = store_cubin(root_, "served");
  seal(root_);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  const TrustedDir ro = TrustedDir::open_read_only_root(root_);
  EXPECT_TRUE(ro.read_only());
  std::string problem;
  const auto entry = CubinStore(ro).load(key, &problem);
  ASSERT_TRUE(entry.has_value()) << problem;
  EXPECT_EQ(entry->payload, jit::test::fake_cubin("sm_90a", "served"));
  // A miss in a read-only root creates nothing (no shard, no cubin/).
  EXPECT_FALSE(CubinStore(ro).load(jit::cache::sha256_hex("absent")).has_value());
  EXPECT_EQ(snapshot_tree(root_), before);
}

TEST_F(ReadOnlyRoot, NothingCanBeCreatedWrittenOrRemovedThroughIt) {
  const std::string key = store_cubin(root_, "kept");
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  const TrustedDir ro = TrustedDir::open_read_only_root(root_);
  EXPECT_THROW(CubinStore(ro).store(jit::cache::sha256_hex("new"), jit::test::fake_cubin("sm_90a"), {{"arch", "sm_90a"}}),
               jit::cache::CacheError);
  EXPECT_THROW(TuningDb(ro).store(Json{{"k", 1}}, Json{{"winner", 1}}), jit::cache::CacheError);
  EXPECT_THROW((void)ro.open_subdir("locks", /*create=*/true), jit::cache::CacheError);
  const auto shard = ro.open_subdir("cubin/" + key.substr(0, 2), /*create=*/false);
  ASSERT_TRUE(shard.has_value());
  EXPECT_TRUE(shard->read_only());
  EXPECT_FALSE(shard->unlink(key + ".cubin"));
  EXPECT_THROW(shard->write_file(key + ".cubin", "x"), jit::cache::CacheError);
  EXPECT_EQ(snapshot_tree(root_), before);
}

TEST_F(ReadOnlyRoot, CorruptEntryIsAMissNamedAndLeftAsItIs) {
  const std::string key = store_cubin(root_, "corrupt");
  const fs::path entry = CubinStore(root_).entry_path(key);
  std::string bytes = cujit_test::slurp(entry);
  bytes[bytes.size() / 2] ^= 0x55;
  cujit_test::spit(entry, bytes);
  seal(root_);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  std::string problem;
  EXPECT_FALSE(CubinStore(TrustedDir::open_read_only_root(root_)).load(key, &problem).has_value());
  EXPECT_TRUE(contains(problem, "does not decode")) << problem;
  // verify reads it, reports it and removes nothing.
  const jit::cache::VerifyReport report = jit::cache::verify_cache(root_, /*remove_bad=*/true, RootAccess::read_only);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_FALSE(report.bad[0].removed);
  EXPECT_EQ(snapshot_tree(root_), before);
}

TEST_F(ReadOnlyRoot, RootWritableByGroupOrOthersIsRefusedNamingTheFix) {
  store_cubin(root_, "entry");
  for (const unsigned mode : {0775u, 0757u, 0777u}) {
    ASSERT_EQ(::chmod(root_.c_str(), mode), 0);
    try {
      (void)TrustedDir::open_read_only_root(root_);
      ADD_FAILURE() << "mode " << std::oct << mode << " was accepted";
    } catch (const UntrustedCacheDir& e) {
      EXPECT_TRUE(contains(e.what(), root_.string())) << e.what();
      EXPECT_TRUE(contains(e.what(), "chmod -R go-w")) << e.what();
      EXPECT_TRUE(contains(e.what(), "CUJIT_CACHE_READONLY_DIRS")) << e.what();
    }
  }
}

TEST_F(ReadOnlyRoot, DirectoryInsideWritableByOthersIsRefused) {
  const std::string key = store_cubin(root_, "entry");
  const fs::path shard = root_ / "cubin" / key.substr(0, 2);
  ASSERT_EQ(::chmod(shard.c_str(), 0777), 0);
  const TrustedDir ro = TrustedDir::open_read_only_root(root_);
  try {
    (void)CubinStore(ro).load(key);
    ADD_FAILURE() << "an entry under a world-writable directory was served";
  } catch (const UntrustedCacheDir& e) {
    EXPECT_TRUE(contains(e.what(), shard.string())) << e.what();
  }
  // The same for tuning/.
  TuningDb(root_).store(Json{{"k", 1}}, Json{{"winner", 1}});
  ASSERT_EQ(::chmod((root_ / "tuning").c_str(), 0770), 0);
  EXPECT_THROW((void)TuningDb(ro).load(Json{{"k", 1}}), UntrustedCacheDir);
}

TEST_F(ReadOnlyRoot, FileWritableByOthersIsSkippedAndLeft) {
  const std::string key = store_cubin(root_, "loose");
  const fs::path entry = CubinStore(root_).entry_path(key);
  ASSERT_EQ(::chmod(entry.c_str(), 0666), 0);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  std::string problem;
  EXPECT_FALSE(CubinStore(TrustedDir::open_read_only_root(root_)).load(key, &problem).has_value());
  EXPECT_TRUE(contains(problem, "writable by group or others")) << problem;
  EXPECT_EQ(snapshot_tree(root_), before);
}

TEST_F(ReadOnlyRoot, SymlinkRootIsRefusedAndMissingRootIsNotUntrusted) {
  fs::create_directory_symlink(root_, tmp_ / "link");
  EXPECT_THROW((void)TrustedDir::open_read_only_root(tmp_ / "link"), UntrustedCacheDir);
  try {
    (void)TrustedDir::open_read_only_root(tmp_ / "missing");
    ADD_FAILURE() << "a missing root was opened";
  } catch (const UntrustedCacheDir& e) {
    ADD_FAILURE() << "a missing root is not a trust problem: " << e.what();
  } catch (const jit::cache::CacheError& e) {
    EXPECT_TRUE(contains(e.what(), (tmp_ / "missing").string())) << e.what();
  }
}

TEST_F(ReadOnlyRoot, RootOwnedByAnotherUserIsServed) {
  need_root();
  const std::string key = store_cubin(root_, "image_layer");
  TuningDb(root_).store(Json{{"k", 2}}, Json{{"winner", 2}});
  seal(root_);
  const Nobody n = nobody();
  cujit_test::chown_tree(root_, n.uid, n.gid);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  // The writable root's rules refuse it ...
  EXPECT_THROW((void)TrustedDir::open_root(root_, /*create=*/false), UntrustedCacheDir);
  // ... a read-only root's serve it.
  const TrustedDir ro = TrustedDir::open_read_only_root(root_);
  std::string problem;
  EXPECT_TRUE(CubinStore(ro).load(key, &problem).has_value()) << problem;
  EXPECT_TRUE(TuningDb(ro).load(Json{{"k", 2}}).has_value());
  EXPECT_EQ(jit::cache::cache_stats(root_, RootAccess::read_only).cubins, 1u);
  EXPECT_TRUE(jit::cache::verify_cache(root_, true, RootAccess::read_only).bad.empty());
  EXPECT_EQ(snapshot_tree(root_), before);
}

TEST_F(ReadOnlyRoot, FileOfAThirdUserInsideIsSkipped) {
  need_root();
  const std::string key = store_cubin(root_, "planted");
  const Nobody n = nobody();
  cujit_test::chown_tree(root_, n.uid, n.gid);
  // Neither the root's owner, nor root, nor us: someone who could not change the root.
  ASSERT_EQ(::lchown(CubinStore(root_).entry_path(key).c_str(), 12345, 12345), 0);
  std::string problem;
  EXPECT_FALSE(CubinStore(TrustedDir::open_read_only_root(root_)).load(key, &problem).has_value());
  EXPECT_TRUE(contains(problem, "uid 12345")) << problem;
  EXPECT_TRUE(fs::exists(CubinStore(root_).entry_path(key)));
}

// --- the layered tuning-record lookup ---------------------------------------

class LayeredTuning : public ReadOnlyRoot {
 protected:
  const Json key_ = {{"family", "f"}, {"spec", 1}};
};

TEST_F(LayeredTuning, WritableRootFirstThenReadOnlyRootsInOrder) {
  const fs::path writable = tmp_ / "writable", second = tmp_ / "second";
  jit::cache::ensure_private_dir(writable);
  jit::cache::ensure_private_dir(second);
  TuningDb(root_).store(key_, Json{{"winner", "first"}});
  TuningDb(second).store(key_, Json{{"winner", "second"}});
  std::vector<TrustedDir> roots = {TrustedDir::open_root(writable, false), TrustedDir::open_read_only_root(root_),
                                   TrustedDir::open_read_only_root(second)};
  EXPECT_EQ(jit::cache::load_tuning_record(roots, key_).value().at("winner"), "first");
  TuningDb(writable).store(key_, Json{{"winner", "writable"}});
  EXPECT_EQ(jit::cache::load_tuning_record(roots, key_).value().at("winner"), "writable");
}

TEST_F(LayeredTuning, CorruptRecordInAReadOnlyRootIsSkippedAndTheNextServes) {
  const fs::path second = tmp_ / "second";
  jit::cache::ensure_private_dir(second);
  TuningDb(root_).store(key_, Json{{"winner", "first"}});
  cujit_test::spit(TuningDb(root_).record_path(key_), "{ not json");
  TuningDb(second).store(key_, Json{{"winner", "second"}});
  seal(root_);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  const std::vector<TrustedDir> roots = {TrustedDir::open_read_only_root(root_),
                                         TrustedDir::open_read_only_root(second)};
  std::vector<std::string> skipped;
  EXPECT_EQ(jit::cache::load_tuning_record(roots, key_, &skipped).value().at("winner"), "second");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_TRUE(contains(skipped[0], TuningDb(root_).record_path(key_).string())) << skipped[0];
  EXPECT_TRUE(contains(skipped[0], "not valid JSON")) << skipped[0];
  EXPECT_EQ(snapshot_tree(root_), before);
}

// --- a tuning choice served from a read-only root ------------------------------

// Configs {"id": 0..2}, the default 0; every one runs.
class ThreeConfigs final : public jit::KernelFamily {
 public:
  std::string name() const override { return "three_configs"; }
  const jit::KernelSources& sources() const override { return sources_; }
  std::vector<Json> config_space(const Json&) const override { return {{{"id", 0}}, {{"id", 1}}, {{"id", 2}}}; }
  std::optional<std::string> why_pruned(const Json&, const Json&, const jit::Target&) const override {
    return std::nullopt;
  }
  Json default_config(const Json&, const jit::Target&) const override { return {{"id", 0}}; }
  std::string variant_name(const Json&, const Json& config) const override {
    return "three_" + std::to_string(config.at("id").get<int>());
  }
  std::string name_expression(const Json&, const Json&) const override { return "k"; }

 private:
  jit::KernelSources sources_;
};

// Config 2 is the fastest.
class FixedClock final : public jit::autotune::EventClock {
 public:
  double next_us = 1;
  void reserve(int) override {}
  void record_start(int) override {}
  void record_stop(int) override {}
  void wait(int) override {}
  double elapsed_us(int) override { return next_us; }
  void flush_l2() override {}
};

TEST_F(ReadOnlyRoot, TuningRecordFromAReadOnlyRootMeansNoTuningAndNoWrite) {
  const ThreeConfigs family;
  FixedClock clock;
  int tuning_runs = 0, db_hits = 0, runs = 0;
  auto hooks = [&] {
    jit::autotune::ChoiceHooks h;
    h.compile = [](const Json&) {};
    h.runner = [&](const Json& config) -> std::function<void()> {
      const int id = config.at("id");
      return [&, id] {
        ++runs;
        clock.next_us = id == 2 ? 0.5 : 1.0;
      };
    };
    h.clock = &clock;
    h.count_tuning_run = [&] { ++tuning_runs; };
    h.count_db_hit = [&] { ++db_hits; };
    return h;
  };
  // A warm-up tunes into what becomes the read-only root.
  int warm_context = 0, serve_context = 0;
  jit::autotune::ChoiceContext warm;
  warm.target.arch = "sm_80";
  warm.target.device_name = "Fake GPU";
  warm.context = &warm_context;
  warm.cache_root = TrustedDir::open_root(root_, /*create=*/false);
  warm.cujit_version = "test";
  warm.nvrtc_version = "0";
  EXPECT_EQ(jit::autotune::choose_config(family, Json{{"s", 1}}, Json{{"b", 1}}, warm, hooks()), (Json{{"id", 2}}));
  ASSERT_EQ(tuning_runs, 1);
  seal(root_);
  const cujit_test::TreeSnapshot before = snapshot_tree(root_);
  // A new process (another CUDA context): no writable root, the read-only one serves.
  tuning_runs = runs = 0;
  jit::autotune::ChoiceContext serve = warm;
  serve.context = &serve_context;
  serve.cache_root.reset();
  serve.read_only_roots = {TrustedDir::open_read_only_root(root_)};
  EXPECT_EQ(jit::autotune::choose_config(family, Json{{"s", 1}}, Json{{"b", 1}}, serve, hooks()), (Json{{"id", 2}}));
  EXPECT_EQ(tuning_runs, 0);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(db_hits, 1);
  EXPECT_EQ(snapshot_tree(root_), before);  // no lock file, no record written
}

}  // namespace
