// The command-line tools as a user meets them: each runs as a subprocess
// (fresh knobs, its own exit status, stdout and stderr apart, stderr not a
// terminal). Tool paths come from compile definitions (tests/CMakeLists.txt).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autotune/tuning_record.h"
#include "cache/tuning_db.h"
#include "jit/kernel_family.h"
#include "tests/support/file_bytes.h"
#include "tests/support/tree_snapshot.h"

namespace fs = std::filesystem;

namespace {

struct ToolRun {
  int status = -1;  // exit status; -1 if it did not exit normally
  std::string out, err;
};

using cujit_test::slurp;

// A fresh directory, removed (made writable first) at the end of the test.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/cujit-tool-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, ignored);
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Runs `tool args...` with `env` set (an empty value unsets the variable).
ToolRun run(const std::string& tool, const std::vector<std::string>& args,
        const std::map<std::string, std::string>& env = {}) {
  TempDir io;
  const fs::path out = io.path() / "out", err = io.path() / "err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) {
      if (value.empty()) {
        ::unsetenv(name.c_str());
      } else {
        ::setenv(name.c_str(), value.c_str(), 1);
      }
    }
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(tool.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  ToolRun r;
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::size_t count_lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// A cache directory cujit refuses: writable by others.
fs::path untrusted_cache(const TempDir& dir) {
  const fs::path cache = dir.path() / "cache";
  fs::create_directory(cache);
  ::chmod(cache.c_str(), 0777);
  return cache;
}

const std::string kWarmup = CUJIT_WARMUP_PATH;
const std::string kCache = CUJIT_CACHE_TOOL_PATH;
const std::string kDemo = CUJIT_DEMO_PATH;
const std::string kServingBench = CUJIT_SERVING_BENCH_PATH;
const std::string kVarlenBench = CUJIT_VARLEN_BENCH_PATH;
const std::string kShape = "1,16,1024,64,fp16,0";

}  // namespace

// --- cujit-cache -----------------------------------------------------------------

TEST(CujitCacheTool, MissingDirIsAnError) {
  TempDir dir;
  const std::string missing = (dir.path() / "no-such-cache").string();
  for (const char* command : {"stats", "ls", "verify", "clear"}) {
    SCOPED_TRACE(command);
    const ToolRun r = run(kCache, {"--dir", missing, command});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(contains(r.err, "does not exist")) << r.err;
    EXPECT_TRUE(contains(r.err, missing)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  const fs::path archive = dir.path() / "out.cujit";
  const ToolRun r = run(kCache, {"--dir", missing, "export", archive.string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(fs::exists(archive)) << "an empty archive was written for a directory that does not exist";
  EXPECT_FALSE(fs::exists(missing)) << "--dir was created";
}

TEST(CujitCacheTool, DirThatIsAFileIsAnError) {
  TempDir dir;
  const fs::path file = dir.path() / "file";
  std::ofstream(file) << "x";
  const ToolRun r = run(kCache, {"--dir", file.string(), "stats"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "not a directory")) << r.err;
}

TEST(CujitCacheTool, ExistingEmptyDirIsFine) {
  TempDir dir;
  const ToolRun r = run(kCache, {"--dir", dir.path().string(), "stats"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "cubins       0")) << r.out;
}

TEST(CujitCacheTool, UnknownSubcommandIsNamedAndTheOthersListed) {
  const ToolRun r = run(kCache, {"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "cujit-cache: unknown subcommand frobnicate")) << r.err;
  for (const char* name : {"ls", "stats", "tuning", "verify", "prune", "clear", "export", "import"}) {
    EXPECT_TRUE(contains(r.err, name)) << name << " is not listed: " << r.err;
  }
  // Also after --dir and its value.
  TempDir dir;
  EXPECT_TRUE(contains(run(kCache, {"--dir", dir.path().string(), "frobnicate"}).err, "unknown subcommand frobnicate"));
  EXPECT_EQ(run(kCache, {"--dir", dir.path().string(), "ls"}).status, 0);
}

TEST(CujitCacheTool, ErrorsCarryOnePrefix) {
  TempDir dir;
  const fs::path cache = untrusted_cache(dir);
  const ToolRun r = run(kCache, {"stats"}, {{"CUJIT_CACHE_DIR", cache.string()}, {"CUJIT_DISK_CACHE", ""}});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("cujit-cache: cache error: ", 0), 0u) << r.err;
  EXPECT_FALSE(contains(r.err, "cujit: ")) << r.err;
}

TEST(CujitCacheTool, HugeMaxBytesIsOutOfRange) {
  TempDir dir;
  for (const char* size : {"99999999999999999999", "17179869184G"}) {
    SCOPED_TRACE(size);
    const ToolRun r = run(kCache, {"--dir", dir.path().string(), "prune", "--max-bytes", size});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(contains(r.err, "out of range")) << r.err;
    EXPECT_FALSE(contains(r.err, "not a size")) << r.err;
  }
  const ToolRun r = run(kCache, {"--dir", dir.path().string(), "prune", "--max-bytes", "12Q"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "not a size")) << r.err;
}

// cujit-cache tuning: each record's candidates fastest first, the tuner's pick
// marked wherever it finished, the ones that failed counted, --family and
// --json; a malformed record is named on stderr and the rest still listed.
TEST(CujitCacheTool, TuningListsEachRecordsCandidatesFastestFirst) {
  TempDir dir;
  const fs::path cache = dir.path() / "cache";
  fs::create_directory(cache);
  ::chmod(cache.c_str(), 0700);
  auto candidate = [](int bn, double us, std::string error = "") {
    return jit::autotune::TimedCandidate{{{"bn", bn}}, fmt::format("attn_decode_bn{}", bn), us, std::move(error)};
  };
  const jit::Json decode_key = {{"family", "attn_decode"}, {"arch", "sm_90a"}, {"device", "H"}, {"spec", {{"d", 128}}}};
  // The pick (bn 32, within the tuner's tie of the fastest) finished third.
  jit::cache::TuningDb(cache).store(
      decode_key, jit::autotune::make_record({candidate(64, 25.5), candidate(128, 25.2), candidate(32, 25.6),
                                              candidate(16, 30.0), candidate(8, 0.0, "ptxas spilled")},
                                             {{"bn", 32}}));
  jit::cache::TuningDb(cache).store({{"family", "attn_sm90"}, {"arch", "sm_90a"}},
                                    jit::autotune::make_record({candidate(128, 700.0)}, {{"bn", 128}}));
  std::ofstream(cache / "tuning" / (std::string(64, 'a') + ".json")) << "{not json";

  ToolRun r = run(kCache, {"--dir", cache.string(), "tuning", "--top", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "unreadable: tuning/" + std::string(64, 'a') + ".json")) << r.err;
  const std::size_t fastest = r.out.find("attn_decode_bn128"), second = r.out.find("attn_decode_bn64"),
                    pick = r.out.find("* ");
  ASSERT_NE(fastest, std::string::npos) << r.out;
  EXPECT_LT(fastest, second) << r.out;
  EXPECT_LT(second, pick) << "the pick after the top two: " << r.out;
  EXPECT_TRUE(contains(r.out.substr(pick), "25.60 us    +1.6%  attn_decode_bn32")) << r.out;
  EXPECT_FALSE(contains(r.out, "attn_decode_bn16 ")) << "past --top and not the pick: " << r.out;
  EXPECT_TRUE(contains(r.out, "1 more timed, 1 not timed (first: attn_decode_bn8: ptxas spilled)")) << r.out;
  EXPECT_TRUE(contains(r.out, "attn_sm90 sm_90a")) << r.out;
  EXPECT_TRUE(contains(r.out, "2 tuning records in " + cache.string())) << r.out;

  r = run(kCache, {"--dir", cache.string(), "tuning", "--family", "attn_decode", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const jit::Json records = jit::Json::parse(r.out);
  ASSERT_EQ(records.size(), 1u) << r.out;
  EXPECT_EQ(records[0]["key"], decode_key);
  EXPECT_EQ(records[0]["winner"], jit::Json({{"bn", 32}}));
  const jit::Json& listed = records[0]["candidates"];
  ASSERT_EQ(listed.size(), 5u) << "--json lists every candidate";
  EXPECT_EQ(listed[0]["variant"], "attn_decode_bn128");
  EXPECT_EQ(listed[3]["variant"], "attn_decode_bn16");
  EXPECT_EQ(listed[4]["error"], "ptxas spilled");
}

// --- cujit-warmup ----------------------------------------------------------------

TEST(CujitWarmupTool, UntrustedCacheStopsWithOneLine) {
  TempDir dir;
  const fs::path cache = untrusted_cache(dir);
  const ToolRun r = run(kWarmup, {"--arch", "sm_89", "--shape", kShape},
                    {{"CUJIT_CACHE_DIR", cache.string()}, {"CUJIT_DISK_CACHE", ""}});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("cujit-warmup: cache error: ", 0), 0u) << r.err;
  EXPECT_FALSE(contains(r.out, "failed")) << r.out;  // no per-variant summary: nothing was compiled
  EXPECT_TRUE(fs::is_empty(cache)) << "something was written to the refused directory";
}

TEST(CujitWarmupTool, DiskCacheOffIsAnError) {
  const ToolRun r = run(kWarmup, {"--arch", "sm_89", "--shape", kShape}, {{"CUJIT_DISK_CACHE", "0"}});
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "CUJIT_DISK_CACHE=0")) << r.err;
  EXPECT_TRUE(contains(r.err, "keep")) << r.err;
  EXPECT_FALSE(contains(r.out, "compiled")) << r.out;  // stopped before compiling
}

// A cache directory that cannot be created leaves cujit without a disk
// cache (memory only): both tools say that, and why, not that
// CUJIT_DISK_CACHE=0, and the warm-up compiles nothing.
TEST(CujitWarmupTool, MemoryOnlyCacheIsAnErrorThatSaysWhy) {
  TempDir dir;
  const fs::path file = dir.path() / "file";
  std::ofstream(file) << "x";
  const std::map<std::string, std::string> env = {{"CUJIT_CACHE_DIR", (file / "cache").string()},
                                                  {"CUJIT_DISK_CACHE", ""}};
  const ToolRun warm = run(kWarmup, {"--arch", "sm_89", "--shape", kShape}, env);
  EXPECT_NE(warm.status, 0);
  EXPECT_TRUE(contains(warm.err, "memory only")) << warm.err;
  EXPECT_TRUE(contains(warm.err, "CUJIT_CACHE_DIR")) << warm.err;
  EXPECT_FALSE(contains(warm.err, "CUJIT_DISK_CACHE=0")) << warm.err;
  EXPECT_FALSE(contains(warm.out, "compiled")) << warm.out;
  const ToolRun stats = run(kCache, {"stats"}, env);
  EXPECT_EQ(stats.status, 1);
  EXPECT_TRUE(contains(stats.err, "memory only")) << stats.err;
  EXPECT_TRUE(contains(stats.err, "--dir")) << stats.err;
  EXPECT_FALSE(contains(stats.err, "CUJIT_DISK_CACHE=0")) << stats.err;
}

// A bound smaller than the set: each store evicts the ones before it. The
// warm-up says so and fails; its progress is plain lines (stderr is a file).
TEST(CujitWarmupTool, CacheTooSmallForTheSetIsAnError) {
  TempDir dir;
  const std::map<std::string, std::string> env = {{"CUJIT_CACHE_DIR", (dir.path() / "cache").string()},
                                                  {"CUJIT_DISK_CACHE", ""},
                                                  {"CUJIT_CACHE_MAX_BYTES", "1"}};
  const ToolRun r = run(kWarmup, {"--arch", "sm_80", "--shape", kShape, "--threads", "2"}, env);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "did not stay in the cache")) << r.err;
  EXPECT_TRUE(contains(r.err, "CUJIT_CACHE_MAX_BYTES")) << r.err;
  EXPECT_FALSE(contains(r.err, "\r")) << "a terminal's progress line in a file";
  EXPECT_FALSE(contains(r.err, "\033[K")) << "a terminal's progress line in a file";
  EXPECT_TRUE(contains(r.err, "variants for sm_80")) << r.err;  // the plain progress lines
}

// docs/serving.md's flow: warm up into X, seal X as an image layer, then a
// new process with an empty writable root and X in CUJIT_CACHE_READONLY_DIRS
// finds every entry there (nothing compiled, nothing written anywhere in X);
// cujit-cache shows both roots and refuses to change X.
TEST(CujitWarmupTool, WarmedDirectoryServesAsAReadOnlyRoot) {
  TempDir dir;
  const fs::path prewarmed = dir.path() / "prewarmed", writable = dir.path() / "writable";
  const std::vector<std::string> args = {"--arch", "sm_80", "--shape", kShape, "--threads", "2", "--json"};
  const ToolRun warm = run(kWarmup, args, {{"CUJIT_CACHE_DIR", prewarmed.string()}, {"CUJIT_DISK_CACHE", ""},
                                           {"CUJIT_CACHE_READONLY_DIRS", ""}});
  ASSERT_EQ(warm.status, 0) << warm.out << warm.err;
  const jit::Json first = jit::Json::parse(warm.out);
  const int variants = first.at("compiled").get<int>();
  ASSERT_GT(variants, 0) << warm.out;
  cujit_test::chmod_tree(prewarmed, 0555, 0444);
  const cujit_test::TreeSnapshot before = cujit_test::snapshot_tree(prewarmed);
  const std::map<std::string, std::string> serve = {{"CUJIT_CACHE_DIR", writable.string()},
                                                    {"CUJIT_DISK_CACHE", ""},
                                                    {"CUJIT_CACHE_READONLY_DIRS", prewarmed.string()}};

  const ToolRun again = run(kWarmup, args, serve);
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  const jit::Json second = jit::Json::parse(again.out);
  EXPECT_EQ(second.at("compiled"), 0) << again.out;
  EXPECT_EQ(second.at("cached"), variants) << again.out;
  EXPECT_EQ(second.at("not_kept"), 0) << again.out;
  EXPECT_FALSE(fs::exists(writable / "cubin")) << "a read-only hit was copied into the writable root";

  const ToolRun stats = run(kCache, {"stats", "--json"}, serve);
  ASSERT_EQ(stats.status, 0) << stats.err;
  const jit::Json s = jit::Json::parse(stats.out);
  EXPECT_EQ(s.at("dir"), writable.string());
  EXPECT_EQ(s.at("read_only"), false);
  EXPECT_EQ(s.at("cubins"), 0);
  ASSERT_EQ(s.at("read_only_roots").size(), 1u) << stats.out;
  EXPECT_EQ(s.at("read_only_roots")[0].at("dir"), prewarmed.string());
  EXPECT_EQ(s.at("read_only_roots")[0].at("read_only"), true);
  EXPECT_EQ(s.at("read_only_roots")[0].at("cubins"), variants);
  const ToolRun text = run(kCache, {"stats"}, serve);
  EXPECT_TRUE(contains(text.out, "read-only    " + prewarmed.string())) << text.out;
  const ToolRun ls = run(kCache, {"ls"}, serve);
  EXPECT_TRUE(contains(ls.out, fmt::format("{} entries in {} (read-only)", variants, prewarmed.string()))) << ls.out;
  EXPECT_EQ(run(kCache, {"verify"}, serve).status, 0);

  const ToolRun clear = run(kCache, {"--dir", prewarmed.string(), "clear"}, serve);
  EXPECT_NE(clear.status, 0);
  EXPECT_TRUE(contains(clear.err, "read-only cache root")) << clear.err;
  const ToolRun prune = run(kCache, {"--dir", prewarmed.string(), "prune", "--max-bytes", "1"}, serve);
  EXPECT_NE(prune.status, 0);
  EXPECT_EQ(run(kCache, {"clear"}, serve).status, 0);  // the writable root only
  EXPECT_EQ(cujit_test::snapshot_tree(prewarmed), before) << "the read-only root was changed";
  cujit_test::chmod_tree(prewarmed, 0700, 0600);  // removable again
}

// verify reads a read-only root and reports a bad entry there, never removing it.
TEST(CujitCacheTool, VerifyReportsABadEntryOfAReadOnlyRootAndLeavesIt) {
  TempDir dir;
  const fs::path ro = dir.path() / "ro";
  const fs::path entry = ro / "cubin" / "aa" / (std::string(64, 'a') + ".cubin");
  fs::create_directories(entry.parent_path());
  cujit_test::spit(entry, "not an entry");
  cujit_test::chmod_tree(ro, 0555, 0444);
  const cujit_test::TreeSnapshot before = cujit_test::snapshot_tree(ro);
  const ToolRun r = run(kCache, {"verify"}, {{"CUJIT_CACHE_DIR", (dir.path() / "w").string()},
                                             {"CUJIT_DISK_CACHE", ""},
                                             {"CUJIT_CACHE_READONLY_DIRS", ro.string()}});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "read-only root: left as it is")) << r.out;
  EXPECT_EQ(cujit_test::snapshot_tree(ro), before);
  cujit_test::chmod_tree(ro, 0700, 0600);  // removable again
}

TEST(CujitWarmupTool, RefusesAnEmptyArchListAndZeroThreads) {
  const ToolRun comma = run(kWarmup, {"--arch", ",", "--shape", kShape});
  EXPECT_NE(comma.status, 0);
  EXPECT_TRUE(contains(comma.err, "names no arch")) << comma.err;
  const ToolRun zero = run(kWarmup, {"--threads", "0", "--shape", kShape});
  EXPECT_NE(zero.status, 0);
  EXPECT_TRUE(contains(zero.err, "--threads")) << zero.err;
}

TEST(CujitWarmupTool, Sm90AloneWarnsThatAnH100IsSm90a) {
  // CUJIT_DISK_CACHE=0 stops it before any compile; the warning comes first.
  const ToolRun alone = run(kWarmup, {"--arch", "sm_90", "--shape", kShape}, {{"CUJIT_DISK_CACHE", "0"}});
  EXPECT_TRUE(contains(alone.err, "warning")) << alone.err;
  EXPECT_TRUE(contains(alone.err, "sm_90a")) << alone.err;
  const ToolRun both = run(kWarmup, {"--arch", "sm_90,sm_90a", "--shape", kShape}, {{"CUJIT_DISK_CACHE", "0"}});
  EXPECT_FALSE(contains(both.err, "warning")) << both.err;
}

TEST(CujitWarmupTool, ManifestProblemsAreNamed) {
  TempDir dir;
  const ToolRun directory = run(kWarmup, {"--manifest", dir.path().string()});
  EXPECT_EQ(directory.status, 1);
  EXPECT_TRUE(contains(directory.err, "is a directory")) << directory.err;
  EXPECT_EQ(directory.err.rfind("cujit-warmup: invalid argument: manifest ", 0), 0u) << directory.err;

  const fs::path missing = dir.path() / "missing.json";
  const ToolRun unreadable = run(kWarmup, {"--manifest", missing.string()});
  EXPECT_TRUE(contains(unreadable.err, "cannot read manifest " + missing.string())) << unreadable.err;

  const fs::path empty_list = dir.path() / "empty.json";
  std::ofstream(empty_list) << R"({"shapes": []})";
  const ToolRun none = run(kWarmup, {"--manifest", empty_list.string()});
  EXPECT_EQ(none.status, 2);
  EXPECT_TRUE(contains(none.err, "has no shapes")) << none.err;
  EXPECT_FALSE(contains(none.err, "give --shape")) << none.err;

  const fs::path truncated = dir.path() / "truncated.json";
  std::ofstream(truncated) << R"({"shapes": [{"seq": 1024, "head_dim": 64})";
  const ToolRun bad = run(kWarmup, {"--manifest", truncated.string()});
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.err, truncated.string() + " is not valid JSON (byte ")) << bad.err;
}

TEST(CujitWarmupTool, HelpDocumentsTheManifest) {
  const ToolRun r = run(kWarmup, {"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* key : {"seq", "head_dim", "batch     1", "heads     16", "dtype     \"fp16\"", "causal    false",
                          "kv_cache  false", "new_rows  1", "heads_kv  heads", "page_size 0", "kv_dtype  dtype",
                          "qkv_dtype dtype", "--qkv-dtype"}) {
    EXPECT_TRUE(contains(r.out, key)) << key;
  }
}

// --qkv-dtype fp8 makes every --shape FP8 attention (e4m3 q, k and v, out in
// the shape's dtype): its variants compile offline for sm_89, and an arch
// without FP8 tensor cores or a value other than fp8 / e4m3 is refused.
TEST(CujitWarmupTool, QkvDtypeFp8WarmsTheFp8Variants) {
  TempDir dir;
  const std::map<std::string, std::string> env = {{"CUJIT_CACHE_DIR", (dir.path() / "cache").string()},
                                                  {"CUJIT_DISK_CACHE", ""},
                                                  {"CUJIT_CACHE_READONLY_DIRS", ""}};
  const ToolRun warm =
      run(kWarmup, {"--arch", "sm_89", "--shape", kShape, "--qkv-dtype", "fp8", "--no-tune", "--json"}, env);
  ASSERT_EQ(warm.status, 0) << warm.out << warm.err;
  EXPECT_GT(jit::Json::parse(warm.out).at("compiled").get<int>(), 0) << warm.out;
  const ToolRun listed = run(kCache, {"--dir", (dir.path() / "cache").string(), "ls"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_TRUE(contains(listed.out, "attn_fwd_portable_d64_e4m3_to_f16_")) << listed.out;

  const ToolRun old_arch = run(kWarmup, {"--arch", "sm_80", "--shape", kShape, "--qkv-dtype", "e4m3"}, env);
  EXPECT_EQ(old_arch.status, 1);
  EXPECT_TRUE(contains(old_arch.err, "cujit-warmup: unsupported: FP8 (e4m3) attention needs sm_89")) << old_arch.err;
  const ToolRun wrong = run(kWarmup, {"--arch", "sm_89", "--shape", kShape, "--qkv-dtype", "fp16"}, env);
  EXPECT_NE(wrong.status, 0);
  EXPECT_TRUE(contains(wrong.err, "--qkv-dtype")) << wrong.err;
  const ToolRun no_shape = run(kWarmup, {"--arch", "sm_89", "--all", "--qkv-dtype", "fp8"}, env);
  EXPECT_EQ(no_shape.status, 2);
  EXPECT_TRUE(contains(no_shape.err, "--qkv-dtype applies to --shape")) << no_shape.err;
}

// --- cujit-demo ------------------------------------------------------------------

TEST(CujitDemoTool, HeadDim256OnSm89SuggestsArch) {
  if (jit::gpu_present()) GTEST_SKIP() << "a GPU is present: the demo runs on it instead of warming offline";
  const ToolRun r = run(kDemo, {"--shape", "1,16,1024,256,fp16,0", "--arch", "sm_89"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "--arch")) << r.err;
  EXPECT_TRUE(contains(r.err, "cujit-demo: unsupported: ")) << r.err;
  EXPECT_FALSE(contains(r.err, "cujit: ")) << r.err;
  const ToolRun comma = run(kDemo, {"--arch", ","});
  EXPECT_EQ(comma.status, 2);
  EXPECT_TRUE(contains(comma.err, "names no arch")) << comma.err;
}

// --- cujit-serving-bench ---------------------------------------------------------

TEST(CujitServingBenchTool, HelpNamesItsFlagsAndWhatItMeasures) {
  const ToolRun r = run(kServingBench, {"--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* part : {"--quick", "--csv", "--pdl", "copy rate", "paged", "CUDA graph", "PDL", "bar"}) {
    EXPECT_TRUE(contains(r.out, part)) << part << " is not in the help: " << r.out;
  }
}

TEST(CujitServingBenchTool, PdlIsZeroOrOne) {
  for (const char* value : {"2", "on", "-1"}) {
    SCOPED_TRACE(value);
    const ToolRun r = run(kServingBench, {"--pdl", value});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, 1) << "a usage error ran the benchmark: " << r.err;
    EXPECT_TRUE(contains(r.err, "--pdl")) << r.err;
  }
}

TEST(CujitServingBenchTool, UnknownOptionIsNamed) {
  const ToolRun r = run(kServingBench, {"--paged-only"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "--paged-only")) << r.err;
}

// Checked before any timing, so a long run never ends without its CSV.
TEST(CujitServingBenchTool, UnwritableCsvIsNamedBeforeAnythingRuns) {
  TempDir dir;
  const std::string csv = (dir.path() / "no-such-dir" / "serving.csv").string();
  const ToolRun r = run(kServingBench, {"--csv", csv});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "cujit-serving-bench: invalid argument: --csv: cannot write " + csv)) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// CUDA_VISIBLE_DEVICES=-1 hides every GPU, so this holds on GPU machines too.
TEST(CujitServingBenchTool, WithoutAGpuItStopsWithTheNoDeviceError) {
  TempDir dir;
  const std::string csv = (dir.path() / "serving.csv").string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--csv", csv, "--quick"},
                                               std::vector<std::string>{"--csv", csv, "--pdl", "0"}}) {
    SCOPED_TRACE(args[2]);
    const ToolRun r = run(kServingBench, args, {{"CUDA_VISIBLE_DEVICES", "-1"}});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(contains(r.err, "cujit-serving-bench: no device: ")) << r.err;
    EXPECT_FALSE(contains(r.err, "cujit: ")) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << "something was measured: " << r.out;
  }
}

// --- cujit-varlen-bench ----------------------------------------------------------

TEST(CujitVarlenBenchTool, HelpNamesItsFlagsAndWhatItMeasures) {
  const ToolRun r = run(kVarlenBench, {"--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* part : {"--quick", "--dtype", "--heads-q", "--heads-kv", "--head-dim", "ragged", "dense", "bar"}) {
    EXPECT_TRUE(contains(r.out, part)) << part << " is not in the help: " << r.out;
  }
}

TEST(CujitVarlenBenchTool, DtypeIsF16Bf16OrFp8) {
  const ToolRun r = run(kVarlenBench, {"--dtype", "e5m2"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 1) << "a usage error ran the benchmark: " << r.err;
  EXPECT_TRUE(contains(r.err, "--dtype")) << r.err;
  // fp8 is taken: past the usage checks, it stops at the missing GPU.
  const ToolRun fp8 = run(kVarlenBench, {"--dtype", "fp8", "--quick"}, {{"CUDA_VISIBLE_DEVICES", "-1"}});
  EXPECT_EQ(fp8.status, 1);
  EXPECT_TRUE(contains(fp8.err, "cujit-varlen-bench: no device: ")) << fp8.err;
}

// CUDA_VISIBLE_DEVICES=-1 hides every GPU, so this holds on GPU machines too.
TEST(CujitVarlenBenchTool, WithoutAGpuItStopsWithTheNoDeviceError) {
  const ToolRun r = run(kVarlenBench, {"--quick"}, {{"CUDA_VISIBLE_DEVICES", "-1"}});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "cujit-varlen-bench: no device: ")) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(CujitVarlenBenchTool, EqualShapeIsBxLAndNamedWhenNot) {
  for (const char* shape : {"16", "16x", "x1024", "0x1024", "16x-1"}) {
    SCOPED_TRACE(shape);
    const ToolRun r = run(kVarlenBench, {"--equal", shape}, {{"CUDA_VISIBLE_DEVICES", "-1"}});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(contains(r.err, std::string("cujit-varlen-bench: invalid argument: --equal ") + shape)) << r.err;
  }
}
