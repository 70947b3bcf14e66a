// cujit_cache_fault_tests: faults injected into a real disk cache, each
// ending in a rebuild or a clear error. No GPU needed (NVRTC compiles).
//
// In this process (CUJIT_CACHE_DIR is a fresh temporary directory): a cubin
// entry of the portable attention family (f16, D=64, not causal, the sm_80
// default config) is truncated, has bytes flipped, is replaced by a valid
// entry for sm_89, by an entry of an older format version, by an entry whose
// metadata names another variant, is deleted before the read, or is replaced
// by a symbolic link to a valid entry; every time the next compile_variant
// misses, recompiles and leaves a valid entry behind. Stores that fail (a file
// where the shard directory should be, a file size limit that makes write()
// fail like a full disk) still return the compiled binary. Tuning records that
// are malformed or belong to another device are misses (cache layer).
//
// In child processes (this binary again, with CUJIT_FAULT_CHILD set and
// --gtest_filter naming the child test): the cache root is resolved once per
// process, so a root that cannot be created (/proc/...), a root that is a
// regular file, or one that is not writable must fall back to memory only;
// an untrusted root (world-writable, a symbolic link) must be refused with
// Error(Cache); a store that fails on every variant is logged once.
// Read-only roots (CUJIT_CACHE_READONLY_DIRS) in fresh processes: a sealed,
// foreign-owned pre-warmed root serves without a compile and is never written;
// the writable root is consulted first, read-only roots in order, a corrupt
// entry skipped; they serve when the writable root is memory-only; a
// group-writable one is refused; a missing one is left out.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "jit/attention/families.h"
#include "jit/binary_cache.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "row_softmax_family.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_snapshot.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using jit::Json;
using jit::cache::CubinStore;

constexpr const char* kChildEnv = "CUJIT_FAULT_CHILD";          // the child's mode
constexpr const char* kChildResultEnv = "CUJIT_FAULT_RESULT";   // where the child writes its verdict
constexpr const char* kChildSuite = "CacheFaultChild";
constexpr auto kChildTimeout = std::chrono::seconds(120);

using cujit_test::slurp;
using cujit_test::spit;

// Rebuilds an entry's trailing SHA-256 after an edit (layout in cubin_store.h).
std::string reseal(std::string bytes) {
  bytes.resize(bytes.size() - 32);
  const jit::cache::Digest d = jit::cache::sha256(bytes);
  bytes.append(reinterpret_cast<const char*>(d.data()), d.size());
  return bytes;
}

// One variant of a family for one arch.
struct Variant {
  const jit::KernelFamily* family;
  Json spec;
  Json config;
  std::string arch;

  std::string key() const {
    const jit::detail::CompileRequest request{&family->sources(), family->name_expression(spec, config), arch,
                                              family->compile_options(spec, config)};
    return jit::detail::binary_cache_key(request);
  }
  std::string variant() const { return family->variant_name(spec, config); }
  jit::CompileReport compile() const { return jit::compile_variant(*family, spec, config, arch); }
};

// The portable attention family, {"dtype":"f16","d":64,"causal":false}, with
// its sm_80 default config, compiled for `arch`.
Variant attention(const std::string& arch = "sm_80") {
  const jit::KernelFamily& family = jit::detail::portable_attention_family();
  const Json spec = {{"dtype", "f16"}, {"d", 64}, {"causal", false}};
  return {&family, spec, family.default_config(spec, jit::offline_target("sm_80")), arch};
}

const example::RowSoftmaxFamily& row_softmax_family() {
  static const example::RowSoftmaxFamily family;
  return family;
}

// Config `i` (0..9) of the row-softmax example family for sm_80.
Variant row_softmax(std::size_t i) {
  const Json spec = {{"dtype", "f32"}};
  return {&row_softmax_family(), spec, row_softmax_family().config_space(spec).at(i), "sm_80"};
}

// ---------------------------------------------------------------------------
// Faults in this process.

class CacheFault : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = jit::cache_directory();
    if (dir.empty()) GTEST_SKIP() << "the disk cache is off: " << jit::cache_status();
    root_ = dir;
    ASSERT_TRUE(jit::cache_status().starts_with("disk: ")) << jit::cache_status();
  }

  fs::path entry_path(const Variant& v) const { return CubinStore(root_).entry_path(v.key()); }

  // Makes sure `v` has a valid entry on disk; returns its bytes.
  std::string cached_entry(const Variant& v) {
    v.compile();
    const fs::path p = entry_path(v);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p))) << p;
    EXPECT_TRUE(CubinStore(root_).load(v.key()).has_value()) << p;
    return slurp(p);
  }

  // After a fault: the next call must not throw, must compile (a miss) and
  // leave a valid entry for this arch and variant; the call after is a hit.
  void expect_rebuilt(const Variant& v, const std::string& fault) {
    SCOPED_TRACE(fault);
    ++faults_;
    const jit::Stats before = jit::stats();
    jit::CompileReport report;
    try {
      report = v.compile();
    } catch (const std::exception& e) {
      FAIL() << "the call after the fault threw: " << e.what();
    }
    EXPECT_FALSE(report.from_cache) << "the faulty entry was used";
    EXPECT_EQ(report.variant, v.variant());
    EXPECT_EQ(report.arch, v.arch);
    EXPECT_GT(report.registers, 0);
    EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
    const fs::path p = entry_path(v);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p))) << p << " was not replaced by a regular file";
    const std::optional<jit::cache::CubinEntry> entry = CubinStore(root_).load(v.key());
    ASSERT_TRUE(entry.has_value()) << "no valid entry after the rebuild";
    EXPECT_EQ(entry->meta.value("arch", ""), v.arch);
    EXPECT_EQ(entry->meta.value("variant", ""), v.variant());
    EXPECT_FALSE(entry->meta.value("lowered_name", "").empty());
    EXPECT_FALSE(entry->payload.empty());
    EXPECT_TRUE(v.compile().from_cache) << "the rebuilt entry is not a hit";
    EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
  }

  void TearDown() override {
    if (faults_ > 0) RecordProperty("faults", faults_);
  }

  fs::path root_;
  int faults_ = 0;
};

TEST_F(CacheFault, TruncatedEntryIsRebuilt) {
  const Variant v = attention();
  const std::string good = cached_entry(v);
  ASSERT_GT(good.size(), 100u);
  // Empty, inside the magic, after the header, mid-payload, without the
  // checksum, one byte short.
  for (std::size_t length : {std::size_t{0}, std::size_t{5}, std::size_t{20}, good.size() / 2, good.size() - 32,
                             good.size() - 1}) {
    spit(entry_path(v), std::string_view(good).substr(0, length));
    expect_rebuilt(v, fmt::format("entry truncated to {} of {} bytes", length, good.size()));
  }
}

TEST_F(CacheFault, FlippedBytesAreRebuilt) {
  const Variant v = attention();
  const std::string good = cached_entry(v);
  const std::size_t meta_at = 8 + 4 + 8;  // magic, version, meta length
  struct Flip {
    std::size_t at;
    const char* where;
  };
  for (const Flip& flip : {Flip{0, "magic"}, Flip{8, "format version"}, Flip{12, "meta length"},
                           Flip{meta_at + 3, "metadata"}, Flip{good.size() / 2, "payload"},
                           Flip{good.size() - 1, "checksum"}}) {
    std::string bad = good;
    bad[flip.at] = static_cast<char>(static_cast<unsigned char>(bad[flip.at]) ^ 0x10);
    spit(entry_path(v), bad);
    expect_rebuilt(v, fmt::format("byte {} ({}) flipped", flip.at, flip.where));
  }
}

TEST_F(CacheFault, EntryForAnotherArchIsRebuilt) {
  const Variant sm80 = attention("sm_80");
  const Variant sm89 = attention("sm_89");
  ASSERT_NE(sm80.key(), sm89.key());
  cached_entry(sm80);
  const std::string other = cached_entry(sm89);

  // 1. The sm_89 file copied over the sm_80 entry's path: its key is wrong.
  spit(entry_path(sm80), other);
  expect_rebuilt(sm80, "valid sm_89 entry copied over the sm_80 entry");

  // 2. The sm_89 binary re-keyed and re-sealed under the sm_80 key: it
  // decodes, so only the metadata check (arch) can refuse it.
  const std::optional<jit::cache::CubinEntry> e89 = CubinStore(root_).load(sm89.key());
  ASSERT_TRUE(e89.has_value());
  ASSERT_EQ(e89->meta.value("arch", ""), "sm_89");
  spit(entry_path(sm80), CubinStore::encode(sm80.key(), e89->payload, e89->meta));
  ASSERT_TRUE(CubinStore(root_).load(sm80.key()).has_value()) << "the planted entry does not even decode";
  expect_rebuilt(sm80, "sm_89 binary re-keyed as the sm_80 entry");
  // The sm_89 entry itself is untouched and still a hit.
  EXPECT_TRUE(sm89.compile().from_cache);
}

TEST_F(CacheFault, EntryWithWrongMetadataIsRebuilt) {
  const Variant v = attention();
  cached_entry(v);
  const std::optional<jit::cache::CubinEntry> good = CubinStore(root_).load(v.key());
  ASSERT_TRUE(good.has_value());
  struct Edit {
    const char* what;
    std::function<void(Json&)> apply;
  };
  const Edit edits[] = {
      {"another variant name", [](Json& m) { m["variant"] = "attn_fwd_portable_other"; }},
      {"empty lowered name", [](Json& m) { m["lowered_name"] = ""; }},
      {"no lowered name", [](Json& m) { m.erase("lowered_name"); }},
      {"no arch", [](Json& m) { m.erase("arch"); }},
      {"arch of the wrong type", [](Json& m) { m["arch"] = 80; }},
      {"registers of the wrong type", [](Json& m) { m["registers"] = "many"; }},
  };
  for (const Edit& edit : edits) {
    Json meta = good->meta;
    edit.apply(meta);
    spit(entry_path(v), CubinStore::encode(v.key(), good->payload, meta));
    if (std::string(edit.what) == "registers of the wrong type") {
      // Arch, variant and lowered name agree: a hit that reads no register
      // count (-1) instead of throwing a JSON type error.
      ++faults_;
      const jit::CompileReport r = v.compile();
      EXPECT_TRUE(r.from_cache);
      EXPECT_EQ(r.registers, -1);
      continue;
    }
    expect_rebuilt(v, edit.what);
  }
  spit(entry_path(v), CubinStore::encode(v.key(), good->payload, good->meta));
  EXPECT_TRUE(v.compile().from_cache);
}

TEST_F(CacheFault, OlderFormatVersionIsRebuilt) {
  const Variant v = attention();
  std::string bytes = cached_entry(v);
  ASSERT_EQ(static_cast<unsigned char>(bytes[8]), jit::cache::kCubinFormatVersion);
  for (int i = 0; i < 4; ++i) bytes[8 + i] = 0;  // u32 format version 0, checksum recomputed
  const std::string old = reseal(bytes);
  ASSERT_FALSE(CubinStore::decode(v.key(), old).has_value());
  spit(entry_path(v), old);
  expect_rebuilt(v, "entry re-sealed with format version 0");
  EXPECT_EQ(static_cast<unsigned char>(slurp(entry_path(v))[8]), jit::cache::kCubinFormatVersion);
}

TEST_F(CacheFault, EntryDeletedBeforeReadIsRebuilt) {
  const Variant v = attention();
  cached_entry(v);
  ASSERT_TRUE(fs::remove(entry_path(v)));
  expect_rebuilt(v, "entry deleted");
  // Its whole shard directory too.
  ASSERT_GT(fs::remove_all(entry_path(v).parent_path()), 0u);
  expect_rebuilt(v, "shard directory deleted");
}

TEST_F(CacheFault, SymlinkAtEntryPathIsNotFollowed) {
  const Variant v = attention();
  const Variant other = attention("sm_89");
  const std::string good = cached_entry(v);
  cached_entry(other);
  // A link to a byte-identical valid copy of this very entry: if it were
  // followed it would be a hit.
  const fs::path planted = root_ / "planted" / (v.key() + ".cubin");
  fs::create_directories(planted.parent_path());
  spit(planted, good);
  for (const fs::path& target : {planted, entry_path(other)}) {
    const std::string target_bytes = slurp(target);
    ASSERT_TRUE(fs::remove(entry_path(v)));
    fs::create_symlink(target, entry_path(v));
    expect_rebuilt(v, "entry replaced by a symlink to " + target.string());
    EXPECT_EQ(slurp(target), target_bytes) << "the link's target was written through";
  }
  fs::remove_all(planted.parent_path());
}

// Stores that fail after the root was fine: the binary is still returned.
TEST_F(CacheFault, StoreIntoAFileWhereTheShardDirectoryShouldBeStillReturnsTheBinary) {
  const Variant v = attention();
  const fs::path shard = entry_path(v).parent_path();
  const fs::path aside = shard.string() + ".aside";
  ::mkdir(shard.parent_path().c_str(), 0700);  // cubin/
  if (fs::exists(shard)) fs::rename(shard, aside);
  spit(shard, "not a directory");  // mkdir/open under it fail (ENOTDIR), even for root
  ASSERT_TRUE(fs::is_regular_file(shard));
  const jit::Stats before = jit::stats();
  jit::CompileReport report;
  try {
    report = v.compile();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a failed store failed the call: " << e.what();
  }
  EXPECT_FALSE(report.from_cache);
  EXPECT_EQ(report.variant, v.variant());
  EXPECT_GT(report.registers, 0);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
  EXPECT_EQ(slurp(shard), "not a directory");
  // The full binary is returned too (what get_kernel loads).
  const jit::detail::VariantBinary binary = jit::detail::obtain_binary(*v.family, v.spec, v.config, v.arch);
  EXPECT_FALSE(binary.from_cache);
  EXPECT_EQ(binary.cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_FALSE(binary.lowered_name.empty());

  fs::remove(shard);
  if (fs::exists(aside)) fs::rename(aside, shard);
  std::error_code ignored;
  fs::remove(entry_path(v), ignored);  // an entry from before the fault, set aside with its shard
  expect_rebuilt(v, "store failed earlier");
}

TEST_F(CacheFault, WriteFailingMidFileLikeAFullDiskStillReturnsTheBinary) {
  // RLIMIT_FSIZE makes write() past the limit fail with EFBIG (SIGXFSZ
  // ignored): a write failure halfway through the temp file, as on a full
  // disk, and one that root cannot bypass.
  const Variant v = attention();
  std::error_code ignored;
  fs::remove(entry_path(v), ignored);
  struct sigaction ignore {}, old_action {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 4096;  // a cubin entry is tens of KiB
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  jit::CompileReport report;
  std::string error;
  try {
    report = v.compile();
  } catch (const std::exception& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_EQ(error, "") << "a failed store failed the call";
  EXPECT_FALSE(report.from_cache);
  EXPECT_GT(report.registers, 0);
  EXPECT_FALSE(fs::exists(entry_path(v))) << "the store did not fail; the fault was not injected";
  // No temp file is left behind.
  for (const jit::cache::CacheFile& f : jit::cache::scan_cache(root_).files) {
    EXPECT_NE(f.kind, jit::cache::CacheFileKind::temp) << f.relative;
  }
  expect_rebuilt(v, "write failed (EFBIG) earlier");
}

// ---------------------------------------------------------------------------
// Tuning records (cache layer): malformed JSON and records for another device
// are misses, never exceptions.

class TuningDbFault : public cujit_test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root_ = tmp_;
  }
  // A tune key as choose_config builds it.
  static Json tune_key(const std::string& device, const std::string& arch = "sm_80") {
    return {{"family", "portable_attention"},
            {"arch", arch},
            {"device", device},
            {"spec", {{"dtype", "f16"}, {"d", 64}, {"causal", false}}},
            {"bucket", {{"sq", 1024}, {"sk", 1024}, {"bh", 64}}},
            {"cujit", "0.1.0"},
            {"nvrtc", "13.0"}};
  }
  static Json record() {
    return {{"winner", {{"bm", 128}, {"bn", 64}, {"stages", 2}, {"warps", 4}}},
            {"candidates", Json::array({{{"variant", "a"}, {"median_us", 10.5}}})}};
  }
  fs::path root_;
};

TEST_F(TuningDbFault, MalformedRecordsAreMisses) {
  const jit::cache::TuningDb db(root_);
  const Json key = tune_key("NVIDIA A100-SXM4-80GB");
  db.store(key, record());
  ASSERT_TRUE(db.load(key).has_value());
  const std::string good = slurp(db.record_path(key));
  int faults = 0;
  // Every truncation; only the one that drops nothing but the final newline
  // is still the same JSON document.
  for (std::size_t n = 0; n + 1 < good.size(); ++n) {
    spit(db.record_path(key), std::string_view(good).substr(0, n));
    EXPECT_FALSE(db.load(key).has_value()) << "truncated to " << n;
    ++faults;
  }
  for (const std::string& bad :
       {std::string("{"), std::string("[]"), std::string("null"), std::string("\"text\""), std::string("42"),
        std::string("{\"key\": }"), std::string("\xff\xfe\x00\x01", 4), std::string(100000, '['),
        std::string("{\"winner\": {\"bm\": 128}}"), good.substr(0, good.size() / 2) + "}}}"}) {
    spit(db.record_path(key), bad);
    EXPECT_FALSE(db.load(key).has_value()) << bad.substr(0, 40);
    ++faults;
  }
  // A byte flipped anywhere either breaks the JSON or changes the key or a
  // value; a load never throws, and a record it returns has the right key.
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ 0x01);
    spit(db.record_path(key), bad);
    std::optional<Json> loaded;
    EXPECT_NO_THROW(loaded = db.load(key)) << "byte " << i;
    if (loaded) {
      EXPECT_EQ(loaded->at("key"), key) << "byte " << i;
    }
    ++faults;
  }
  RecordProperty("faults", faults);
  spit(db.record_path(key), good);
  EXPECT_TRUE(db.load(key).has_value());
}

TEST_F(TuningDbFault, RecordsForAnotherDeviceOrArchAreMisses) {
  const jit::cache::TuningDb db(root_);
  const Json a100 = tune_key("NVIDIA A100-SXM4-80GB");
  const Json l4 = tune_key("NVIDIA L4", "sm_89");
  const Json a100_other_arch = tune_key("NVIDIA A100-SXM4-80GB", "sm_86");
  db.store(l4, record());
  ASSERT_TRUE(db.load(l4).has_value());
  // The L4 record copied to where the A100's would be.
  fs::create_directories(db.record_path(a100).parent_path());
  fs::copy_file(db.record_path(l4), db.record_path(a100));
  EXPECT_FALSE(db.load(a100).has_value());
  // The A100 record edited to claim another arch, under its own name.
  Json edited = record();
  edited["key"] = a100_other_arch;
  spit(db.record_path(a100), edited.dump());
  EXPECT_FALSE(db.load(a100).has_value());
  // A record without a key.
  spit(db.record_path(a100), record().dump());
  EXPECT_FALSE(db.load(a100).has_value());
  // The L4 record itself is intact.
  EXPECT_TRUE(db.load(l4).has_value());
}

// ---------------------------------------------------------------------------
// Faults that need a fresh process: the cache root is resolved once.

struct ChildOutcome {
  std::string error;  // could not start or wait
  bool timed_out = false;
  int wait_status = 0;
  std::string verdict;  // what the child wrote to its result file
  std::string log;      // its stderr
};

// Runs this binary's child test `mode` with `env` added (CUJIT_CACHE_DIR,
// CUJIT_LOG, ...), its stderr captured.
ChildOutcome run_child(const std::string& mode, const std::vector<std::string>& extra_env, const fs::path& work) {
  ChildOutcome outcome;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    outcome.error = "cannot resolve /proc/self/exe: " + ec.message();
    return outcome;
  }
  const fs::path result = work / (mode + ".result");
  const fs::path log = work / (mode + ".stderr");
  fs::remove(result, ec);
  std::vector<std::string> args = {exe.string(), fmt::format("--gtest_filter={}.{}", kChildSuite, mode)};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("GTEST_") || entry.starts_with("CUJIT_")) continue;
    env.emplace_back(entry);
  }
  env.push_back(fmt::format("{}={}", kChildEnv, mode));
  env.push_back(fmt::format("{}={}", kChildResultEnv, result.string()));
  for (const std::string& e : extra_env) env.push_back(e);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    outcome.error = fmt::format("posix_spawn({}) failed: {}", exe.string(), std::strerror(rc));
    return outcome;
  }
  const auto deadline = std::chrono::steady_clock::now() + kChildTimeout;
  for (;;) {
    const pid_t done = ::waitpid(pid, &outcome.wait_status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      outcome.error = fmt::format("waitpid({}) failed: {}", pid, std::strerror(errno));
      return outcome;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);  // our own child, by its id
      ::waitpid(pid, &outcome.wait_status, 0);
      outcome.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.verdict = fs::exists(result) ? slurp(result) : std::string();
  outcome.log = fs::exists(log) ? slurp(log) : std::string();
  return outcome;
}

std::size_t count_lines_with(const std::string& text, std::string_view needle) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

class FreshProcess : public cujit_test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    work_ = tmp_;
  }
  // Runs the child and checks that it exited 0 with an "ok" verdict.
  ChildOutcome expect_child_ok(const std::string& mode, const std::vector<std::string>& env) {
    ChildOutcome child = run_child(mode, env, work_);
    EXPECT_TRUE(child.error.empty()) << child.error;
    EXPECT_FALSE(child.timed_out) << "the child was killed after " << kChildTimeout.count() << " s";
    EXPECT_TRUE(WIFEXITED(child.wait_status) && WEXITSTATUS(child.wait_status) == 0)
        << "the child failed; its stderr:\n"
        << child.log;
    EXPECT_TRUE(child.verdict.starts_with("ok")) << "verdict: '" << child.verdict << "'; stderr:\n" << child.log;
    return child;
  }
  fs::path work_;
};

TEST_F(FreshProcess, UncreatableRootFallsBackToMemoryOnlyAndSaysSoOnce) {
  const ChildOutcome child =
      expect_child_ok("memory_only", {"CUJIT_CACHE_DIR=/proc/cujit-nope/cache", "CUJIT_LOG=info"});
  EXPECT_FALSE(fs::exists("/proc/cujit-nope"));
  EXPECT_EQ(count_lines_with(child.log, "kept in memory only"), 1u) << child.log;
  EXPECT_NE(child.verdict.find("memory only: "), std::string::npos) << child.verdict;
}

TEST_F(FreshProcess, RootThatIsARegularFileFallsBackToMemoryOnly) {
  spit(work_ / "cache", "a file, not a directory");
  const ChildOutcome child =
      expect_child_ok("memory_only", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "cache").string()), "CUJIT_LOG=info"});
  EXPECT_EQ(count_lines_with(child.log, "kept in memory only"), 1u) << child.log;
  EXPECT_EQ(slurp(work_ / "cache"), "a file, not a directory");
}

TEST_F(FreshProcess, RootUnderAFileFallsBackToMemoryOnly) {
  spit(work_ / "file", "x");  // mkdir file/cache fails with ENOTDIR
  expect_child_ok("memory_only", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "file" / "cache").string())});
}

TEST_F(FreshProcess, RootWithoutWritePermissionFallsBackToMemoryOnly) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: mode bits do not stop root from writing";
  fs::create_directory(work_ / "cache");
  ASSERT_EQ(::chmod((work_ / "cache").c_str(), 0500), 0);
  expect_child_ok("memory_only", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "cache").string())});
  fs::create_directory(work_ / "parent");
  ASSERT_EQ(::chmod((work_ / "parent").c_str(), 0500), 0);
  expect_child_ok("memory_only", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "parent" / "cache").string())});
}

TEST_F(FreshProcess, WorldWritableRootIsRefused) {
  fs::create_directory(work_ / "cache");
  ASSERT_EQ(::chmod((work_ / "cache").c_str(), 0777), 0);
  const ChildOutcome child =
      expect_child_ok("refused", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "cache").string())});
  EXPECT_NE(child.verdict.find("chmod 700"), std::string::npos) << child.verdict;
  EXPECT_EQ((fs::status(work_ / "cache").permissions() & fs::perms::all), fs::perms::all) << "the mode was changed";
}

TEST_F(FreshProcess, SymlinkRootIsRefused) {
  fs::create_directory(work_ / "real");
  ASSERT_EQ(::chmod((work_ / "real").c_str(), 0700), 0);
  fs::create_directory_symlink(work_ / "real", work_ / "cache");
  const ChildOutcome child =
      expect_child_ok("refused", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "cache").string())});
  EXPECT_NE(child.verdict.find("symbolic link"), std::string::npos) << child.verdict;
  EXPECT_TRUE(fs::is_empty(work_ / "real")) << "something was written through the link";
}

TEST_F(FreshProcess, StoresThatAllFailAreLoggedOnce) {
  // The root is fine, but cubin/ is a file: every store fails (ENOTDIR).
  fs::create_directory(work_ / "cache");
  ASSERT_EQ(::chmod((work_ / "cache").c_str(), 0700), 0);
  spit(work_ / "cache" / "cubin", "not a directory");
  const ChildOutcome child =
      expect_child_ok("store_fails", {fmt::format("CUJIT_CACHE_DIR={}", (work_ / "cache").string()), "CUJIT_LOG=info"});
  EXPECT_EQ(count_lines_with(child.log, "could not store"), 1u) << child.log;
  EXPECT_EQ(slurp(work_ / "cache" / "cubin"), "not a directory");
}

// --- read-only roots -----------------------------------------------------------

class ReadOnlyRootProcess : public FreshProcess {
 protected:
  // The attention variant's valid entry, compiled in this process.
  std::string attention_entry() {
    const Variant v = attention();
    v.compile();
    return slurp(CubinStore(fs::path(jit::cache_directory())).entry_path(v.key()));
  }
  // A pre-warmed root at work_/name holding `entry_bytes` at the attention
  // variant's entry path, sealed as an image layer (dirs 555, files 444) and,
  // when running as root, owned by nobody.
  fs::path prewarmed(const std::string& name, const std::string& entry_bytes) {
    const fs::path root = work_ / name;
    const fs::path entry = CubinStore(root).entry_path(attention().key());
    fs::create_directories(entry.parent_path());
    spit(entry, entry_bytes);
    cujit_test::chmod_tree(root, 0555, 0444);
    if (::geteuid() == 0) cujit_test::chown_tree(root, 65534, 65534);
    return root;
  }
  static std::string env(const char* name, const fs::path& value) { return fmt::format("{}={}", name, value.string()); }
};

TEST_F(ReadOnlyRootProcess, SealedForeignRootServesANewProcessWithoutACompileAndIsNeverWritten) {
  const fs::path ro = prewarmed("prewarmed", attention_entry());
  const cujit_test::TreeSnapshot before = cujit_test::snapshot_tree(ro);
  const fs::path writable = work_ / "writable";
  const ChildOutcome child = expect_child_ok(
      "served_from_cache",
      {env("CUJIT_CACHE_DIR", writable), env("CUJIT_CACHE_READONLY_DIRS", ro), "CUJIT_LOG=debug"});
  EXPECT_NE(child.log.find("in read-only root " + ro.string()), std::string::npos) << child.log;
  EXPECT_NE(child.verdict.find("; read-only: " + ro.string()), std::string::npos) << child.verdict;
  EXPECT_EQ(cujit_test::snapshot_tree(ro), before) << "the read-only root was written";
  EXPECT_FALSE(fs::exists(writable / "cubin")) << "the hit was copied into the writable root";
}

TEST_F(ReadOnlyRootProcess, WritableRootIsConsultedFirst) {
  const std::string entry = attention_entry();
  const fs::path ro = prewarmed("prewarmed", entry);
  const fs::path writable = work_ / "writable";
  const fs::path mine = CubinStore(writable).entry_path(attention().key());
  fs::create_directories(mine.parent_path());
  spit(mine, entry);
  cujit_test::chmod_tree(writable, 0700, 0600);
  const struct timespec old[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};  // 2001: a last use long ago
  ASSERT_EQ(::utimensat(AT_FDCWD, mine.c_str(), old, 0), 0);
  const cujit_test::TreeSnapshot before = cujit_test::snapshot_tree(ro);
  const ChildOutcome child = expect_child_ok(
      "served_from_cache",
      {env("CUJIT_CACHE_DIR", writable), env("CUJIT_CACHE_READONLY_DIRS", ro), "CUJIT_LOG=debug"});
  EXPECT_EQ(child.log.find("in read-only root"), std::string::npos) << child.log;
  struct stat st {};
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, 1'000'000'000) << "the writable root's hit was not the one served (no last-use mark)";
  EXPECT_EQ(cujit_test::snapshot_tree(ro), before);
}

TEST_F(ReadOnlyRootProcess, ReadOnlyRootsInOrderACorruptEntrySkippedAndLeft) {
  const std::string entry = attention_entry();
  std::string corrupt = entry;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  const fs::path first = prewarmed("first", corrupt), second = prewarmed("second", entry),
                 third = prewarmed("third", entry);
  const cujit_test::TreeSnapshot first_before = cujit_test::snapshot_tree(first);
  const ChildOutcome child = expect_child_ok(
      "served_from_cache", {env("CUJIT_CACHE_DIR", work_ / "writable"),
                            fmt::format("CUJIT_CACHE_READONLY_DIRS={}:{}:{}", first.string(), second.string(),
                                        third.string()),
                            "CUJIT_LOG=debug"});
  EXPECT_EQ(count_lines_with(child.log, "skipped " + first.string()), 1u) << child.log;
  EXPECT_NE(child.log.find("in read-only root " + second.string()), std::string::npos) << child.log;
  EXPECT_EQ(child.log.find("in read-only root " + third.string()), std::string::npos) << child.log;
  EXPECT_EQ(cujit_test::snapshot_tree(first), first_before) << "the corrupt entry was repaired or removed";
}

TEST_F(ReadOnlyRootProcess, ReadOnlyRootsServeWhenTheWritableRootIsMemoryOnly) {
  const fs::path ro = prewarmed("prewarmed", attention_entry());
  const ChildOutcome child = expect_child_ok(
      "served_from_cache", {"CUJIT_CACHE_DIR=/proc/cujit-nope/cache", env("CUJIT_CACHE_READONLY_DIRS", ro)});
  EXPECT_NE(child.verdict.find("memory only: "), std::string::npos) << child.verdict;
  EXPECT_NE(child.verdict.find("; read-only: " + ro.string()), std::string::npos) << child.verdict;
}

TEST_F(ReadOnlyRootProcess, GroupWritableReadOnlyRootIsRefused) {
  const fs::path ro = prewarmed("prewarmed", attention_entry());
  ASSERT_EQ(::chmod(ro.c_str(), 0775), 0);
  const ChildOutcome child = expect_child_ok(
      "read_only_refused", {env("CUJIT_CACHE_DIR", work_ / "writable"), env("CUJIT_CACHE_READONLY_DIRS", ro)});
  EXPECT_NE(child.verdict.find(ro.string()), std::string::npos) << child.verdict;
  EXPECT_NE(child.verdict.find("chmod -R go-w"), std::string::npos) << child.verdict;
}

TEST_F(ReadOnlyRootProcess, MissingReadOnlyRootIsLeftOutAndSaid) {
  const ChildOutcome child = expect_child_ok(
      "compiles_once",
      {env("CUJIT_CACHE_DIR", work_ / "writable"), env("CUJIT_CACHE_READONLY_DIRS", work_ / "nope"), "CUJIT_LOG=info"});
  EXPECT_EQ(count_lines_with(child.log, "read-only cache root left out"), 1u) << child.log;
}

// ---------------------------------------------------------------------------
// The children (registered only when CUJIT_FAULT_CHILD is set).

void write_verdict(const std::string& text) {
  if (const char* path = std::getenv(kChildResultEnv); path != nullptr && *path != '\0') {
    std::ofstream(path) << text << '\n';
  }
}

class ChildTest : public ::testing::Test {
 public:
  explicit ChildTest(std::string mode) : mode_(std::move(mode)) {}
  void TestBody() override {
    std::string note;
    if (mode_ == "memory_only") {
      note = memory_only();
    } else if (mode_ == "refused") {
      note = refused();
    } else if (mode_ == "store_fails") {
      note = store_fails();
    } else if (mode_ == "served_from_cache") {
      note = served_from_cache();
    } else if (mode_ == "read_only_refused") {
      note = read_only_refused();
    } else if (mode_ == "compiles_once") {
      note = compiles_once();
    } else {
      FAIL() << "unknown child mode " << mode_;
    }
    write_verdict((HasFailure() ? "failed " : "ok ") + note);
  }

 private:
  // The root could not be made or used: no disk cache, and everything works.
  std::string memory_only() {
    const std::string status = jit::cache_status();
    EXPECT_TRUE(status.starts_with("memory only: ")) << status;
    EXPECT_EQ(jit::cache_directory(), "");
    const Variant variants[] = {attention(), row_softmax(0), row_softmax(1), attention()};
    for (const Variant& v : variants) {
      try {
        const jit::CompileReport r = v.compile();
        EXPECT_FALSE(r.from_cache) << v.variant();
        EXPECT_GT(r.registers, 0) << v.variant();
      } catch (const std::exception& e) {
        ADD_FAILURE() << v.variant() << " threw: " << e.what();
      }
    }
    // No disk: the repeated attention variant is compiled again.
    EXPECT_EQ(jit::stats().nvrtc_compiles, 4);
    EXPECT_EQ(jit::stats().disk_cache_hits, 0);
    return status;
  }

  // An untrusted root: Error(Cache) from every entry point, nothing compiled.
  std::string refused() {
    std::string message;
    try {
      const std::string status = jit::cache_status();
      ADD_FAILURE() << "cache_status() accepted an untrusted directory: " << status;
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Cache) << e.what();
      message = e.what();
    }
    try {
      attention().compile();
      ADD_FAILURE() << "compile_variant used an untrusted directory";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Cache) << e.what();
      EXPECT_EQ(std::string(e.what()), message);
    }
    EXPECT_THROW(jit::cache_directory(), jit::Error);
    EXPECT_EQ(jit::stats().nvrtc_compiles, 0);
    return message;
  }

  // The root is fine but every store fails: every call still works.
  std::string store_fails() {
    const std::string status = jit::cache_status();
    EXPECT_TRUE(status.starts_with("disk: ")) << status;
    for (std::size_t i : {0, 1, 2, 0}) {
      const Variant v = row_softmax(i);
      try {
        const jit::CompileReport r = v.compile();
        EXPECT_FALSE(r.from_cache) << v.variant();
        EXPECT_GT(r.registers, 0) << v.variant();
      } catch (const std::exception& e) {
        ADD_FAILURE() << v.variant() << " threw: " << e.what();
      }
    }
    EXPECT_EQ(jit::stats().nvrtc_compiles, 4);
    return status;
  }

  // The attention variant is served from a disk cache root: no compile.
  std::string served_from_cache() {
    const std::string status = jit::cache_status();
    try {
      const jit::CompileReport r = attention().compile();
      EXPECT_TRUE(r.from_cache);
      EXPECT_GT(r.registers, 0);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "compile_variant threw: " << e.what();
    }
    EXPECT_EQ(jit::stats().nvrtc_compiles, 0);
    EXPECT_EQ(jit::stats().disk_cache_hits, 1);
    return status;
  }

  // An untrusted read-only root: Error(Cache) from the status and the lookup, nothing compiled.
  std::string read_only_refused() {
    std::string message;
    try {
      ADD_FAILURE() << "cache_status() accepted an untrusted read-only root: " << jit::cache_status();
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Cache) << e.what();
      message = e.what();
    }
    try {
      attention().compile();
      ADD_FAILURE() << "compile_variant went on past an untrusted read-only root";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Cache) << e.what();
      EXPECT_EQ(std::string(e.what()), message);
    }
    EXPECT_EQ(jit::stats().nvrtc_compiles, 0);
    return message;
  }

  // Nothing to serve: one compile, and the process goes on.
  std::string compiles_once() {
    const std::string status = jit::cache_status();
    try {
      EXPECT_FALSE(attention().compile().from_cache);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "compile_variant threw: " << e.what();
    }
    EXPECT_EQ(jit::stats().nvrtc_compiles, 1);
    return status;
  }

  std::string mode_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* mode = std::getenv(kChildEnv); mode != nullptr && *mode != '\0') {
    const std::string name = mode;
    ::testing::RegisterTest(kChildSuite, mode, nullptr, nullptr, __FILE__, __LINE__,
                            [name]() -> ::testing::Test* { return new ChildTest(name); });
    GTEST_FLAG_SET(filter, fmt::format("{}.{}", kChildSuite, name));
    return RUN_ALL_TESTS();
  }
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  // A fresh cache directory for this process, as tests/support/temp_cache_main.cpp does.
  std::string dir;
  if (std::getenv("CUJIT_CACHE_DIR") == nullptr) {
    char pattern[] = "/tmp/cujit-test-cache-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return 2;
    dir = pattern;
    ::setenv("CUJIT_CACHE_DIR", dir.c_str(), 1);
  }
  const int result = RUN_ALL_TESTS();
  if (!dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return result;
}
