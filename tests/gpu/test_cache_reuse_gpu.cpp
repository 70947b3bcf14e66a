// cujit_gpu_cache_tests: what one process compiles and tunes, the next one
// reuses. The parent test runs one attention call with a fresh cache
// directory and autotuning on (it compiles and tunes), then starts this same
// binary again (/proc/self/exe, CUJIT_TEST_CHILD=1) with the same
// CUJIT_CACHE_DIR; the child runs the same call and checks that it compiled
// and tuned nothing, finding the winner in the tuning DB. A second child
// starts on an empty cache directory with the parent's as a read-only root
// (CUJIT_CACHE_READONLY_DIRS, a pre-warmed cache mounted read-only) and must
// be served from it alike, writing nothing there. The child test is
// registered only in the child, so test discovery never lists it.
//
// cujit reads its knobs once per process: main() sets them before any cujit
// call (and, under --gtest_list_tests, sets nothing and touches no GPU).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "attention_check.h"
#include "gpu_test_support.h"
#include "jit/attention.h"
#include "jit/kernel_family.h"

extern char** environ;

namespace cujit_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChildEnv = "CUJIT_TEST_CHILD";               // "1" in the child
constexpr const char* kChildResultEnv = "CUJIT_TEST_CHILD_RESULT";  // where the child writes its verdict
constexpr const char* kChildSuite = "CacheReuseChild";
constexpr const char* kChildTest = "SameCallFindsKernelsAndTuningOnDisk";
constexpr auto kChildTimeout = std::chrono::seconds(300);

fs::path g_work_dir;  // the parent's temporary directory: cache/ and the child's verdict

// B = 1, H = 4, S = 512, D = 64, fp16, no mask.
AttnCase the_case() {
  AttnCase c;
  c.dtype = jit::DType::f16;
  c.batch = 1;
  c.heads_q = c.heads_kv = 4;
  c.seq_q = c.seq_k = 512;
  c.head_dim = 64;
  c.lse = true;
  return c;
}

jit::Stats operator-(const jit::Stats& a, const jit::Stats& b) {
  return {a.nvrtc_compiles - b.nvrtc_compiles, a.disk_cache_hits - b.disk_cache_hits, a.tuning_runs - b.tuning_runs,
          a.tuning_db_hits - b.tuning_db_hits};
}

std::string stats_text(const jit::Stats& s) {
  return fmt::format("nvrtc_compiles={} disk_cache_hits={} tuning_runs={} tuning_db_hits={}", s.nvrtc_compiles,
                     s.disk_cache_hits, s.tuning_runs, s.tuning_db_hits);
}

// Every file under `dir` with its size and modification time, one a line.
std::string listing(const fs::path& dir) {
  std::vector<std::string> lines;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    lines.push_back(fmt::format("{} {} {}", entry.path().string(), entry.file_size(),
                                entry.last_write_time().time_since_epoch().count()));
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  return text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------
// The child: the same call in a second process.

class CacheReuseChild : public ::testing::Test {
 public:
  void TestBody() override {
    CUJIT_REQUIRE_GPU();
    {
      TestRng rng;
      run_and_check(the_case(), rng);
    }
    const jit::Stats s = jit::stats();
    EXPECT_EQ(s.nvrtc_compiles, 0) << "the child compiled kernels the parent had cached: " << stats_text(s);
    EXPECT_EQ(s.tuning_runs, 0) << "the child tuned again: " << stats_text(s);
    EXPECT_EQ(s.tuning_db_hits, 1) << "the child did not find the tuning record: " << stats_text(s);
    EXPECT_GE(s.disk_cache_hits, 1) << "the child did not load the winner from the disk cache: " << stats_text(s);
    if (const char* path = std::getenv(kChildResultEnv); path != nullptr && *path != '\0') {
      std::ofstream(path) << (HasFailure() ? "failed " : "ok ") << stats_text(s) << '\n';
    }
  }
};

// ---------------------------------------------------------------------------
// The parent.

struct ChildOutcome {
  std::string error;  // non-empty when it could not be started or waited for
  bool timed_out = false;
  int wait_status = 0;
};

// `extra_env`: NAME=value entries that replace the parent's NAME.
ChildOutcome run_child(const fs::path& result_path, const std::vector<std::string>& extra_env = {}) {
  ChildOutcome outcome;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    outcome.error = "cannot resolve /proc/self/exe: " + ec.message();
    return outcome;
  }
  std::vector<std::string> args = {exe.string(), fmt::format("--gtest_filter={}.{}", kChildSuite, kChildTest)};
  // The parent's environment (CUJIT_CACHE_DIR and CUJIT_AUTOTUNE included),
  // less gtest's own variables (output files, sharding) that belong to the parent.
  std::vector<std::string> env;
  auto replaced = [&](std::string_view entry) {
    for (const std::string& extra : extra_env) {
      if (entry.starts_with(extra.substr(0, extra.find('=') + 1))) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("GTEST_") || entry.starts_with(kChildEnv) || replaced(entry)) continue;
    env.emplace_back(entry);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  env.push_back(fmt::format("{}=1", kChildEnv));
  env.push_back(fmt::format("{}={}", kChildResultEnv, result_path.string()));
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::fflush(stdout);  // so that the child's output follows ours
  std::fflush(stderr);
  pid_t pid = 0;
  if (const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    outcome.error = fmt::format("posix_spawn({}) failed: {}", exe.string(), std::strerror(rc));
    return outcome;
  }
  const auto deadline = std::chrono::steady_clock::now() + kChildTimeout;
  for (;;) {
    const pid_t done = ::waitpid(pid, &outcome.wait_status, WNOHANG);
    if (done == pid) return outcome;
    if (done < 0 && errno != EINTR) {
      outcome.error = fmt::format("waitpid({}) failed: {}", pid, std::strerror(errno));
      return outcome;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);  // our own child, by its id
      ::waitpid(pid, &outcome.wait_status, 0);
      outcome.timed_out = true;
      return outcome;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(CacheReuse, SecondProcessReusesCompiledKernelsAndTuning) {
  CUJIT_REQUIRE_GPU();
  ASSERT_FALSE(g_work_dir.empty()) << "main() did not set up the cache directory";
  const char* cache_dir = std::getenv("CUJIT_CACHE_DIR");
  ASSERT_NE(cache_dir, nullptr);
  SCOPED_TRACE(fmt::format("CUJIT_CACHE_DIR={}", cache_dir));

  // 1. First call in a fresh process with an empty cache: compiles and tunes.
  const jit::Stats start = jit::stats();
  {
    TestRng rng;
    run_and_check(the_case(), rng);
  }
  ASSERT_FALSE(HasFailure()) << "the first call is wrong; not checking reuse";
  const jit::Stats after_first = jit::stats();
  const jit::Stats first = after_first - start;
  EXPECT_EQ(first.tuning_runs, 1) << stats_text(first);
  EXPECT_GT(first.nvrtc_compiles, 0) << stats_text(first);
  EXPECT_EQ(first.tuning_db_hits, 0) << "the cache directory was not empty: " << stats_text(first);

  // 2. The same call again in this process: answered from memory.
  {
    TestRng rng;
    run_and_check(the_case(), rng);
  }
  const jit::Stats second = jit::stats() - after_first;
  EXPECT_EQ(second.nvrtc_compiles, 0) << stats_text(second);
  EXPECT_EQ(second.tuning_runs, 0) << stats_text(second);
  EXPECT_EQ(second.tuning_db_hits, 0) << stats_text(second);

  // 3. A second process with the same cache directory.
  const fs::path result_path = g_work_dir / "child_result.txt";
  std::error_code ec;
  fs::remove(result_path, ec);
  const ChildOutcome child = run_child(result_path);
  ASSERT_TRUE(child.error.empty()) << child.error;
  ASSERT_FALSE(child.timed_out) << "the child ran longer than " << kChildTimeout.count() << " s and was killed";
  ASSERT_TRUE(WIFEXITED(child.wait_status))
      << "the child did not exit normally"
      << (WIFSIGNALED(child.wait_status) ? fmt::format(" (signal {})", WTERMSIG(child.wait_status)) : std::string());
  EXPECT_EQ(WEXITSTATUS(child.wait_status), 0) << "the child failed; its output is above";
  const std::string verdict = fs::exists(result_path) ? read_text(result_path) : std::string();
  EXPECT_TRUE(verdict.starts_with("ok ")) << "the child's verdict: '" << verdict
                                          << "' (empty: it skipped or did not run; its output is above)";

  // 4. A process with an empty writable cache and this one's as a read-only
  // root: served from it (the same checks), and nothing written there.
  const std::string before = listing(cache_dir);
  const fs::path fresh = g_work_dir / "fresh-cache";
  fs::remove(result_path, ec);
  const ChildOutcome layered = run_child(
      result_path, {fmt::format("CUJIT_CACHE_DIR={}", fresh.string()), fmt::format("CUJIT_CACHE_READONLY_DIRS={}", cache_dir)});
  ASSERT_TRUE(layered.error.empty()) << layered.error;
  ASSERT_FALSE(layered.timed_out) << "the read-only child ran longer than " << kChildTimeout.count() << " s";
  ASSERT_TRUE(WIFEXITED(layered.wait_status)) << "the read-only child did not exit normally";
  EXPECT_EQ(WEXITSTATUS(layered.wait_status), 0) << "the read-only child failed; its output is above";
  const std::string layered_verdict = fs::exists(result_path) ? read_text(result_path) : std::string();
  EXPECT_TRUE(layered_verdict.starts_with("ok ")) << "the read-only child's verdict: '" << layered_verdict << "'";
  EXPECT_EQ(listing(cache_dir), before) << "the read-only root changed";
}

}  // namespace
}  // namespace cujit_test

int main(int argc, char** argv) {
  using namespace cujit_test;
  ::testing::InitGoogleTest(&argc, argv);

  if (const char* child = std::getenv(kChildEnv); child != nullptr && std::string(child) == "1") {
    // The child: its environment (the parent's cache directory) is inherited.
    ::testing::RegisterTest(kChildSuite, kChildTest, nullptr, nullptr, __FILE__, __LINE__,
                            []() -> CacheReuseChild* { return new CacheReuseChild; });
    GTEST_FLAG_SET(filter, fmt::format("{}.{}", kChildSuite, kChildTest));
    return RUN_ALL_TESTS();
  }
  if (listing_tests_only()) return RUN_ALL_TESTS();

  std::optional<TempDir> work;
  try {
    work.emplace("cujit_gpu_cache_tests");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujit_gpu_cache_tests: cannot make a temporary directory: %s\n", e.what());
    return 1;
  }
  g_work_dir = work->path();
  const std::string cache_dir = (work->path() / "cache").string();  // cujit creates it, mode 0700
  ::setenv("CUJIT_CACHE_DIR", cache_dir.c_str(), 1);
  ::setenv("CUJIT_AUTOTUNE", "full", 1);   // this suite is about tuning
  ::setenv("CUJIT_DISK_CACHE", "1", 1);    // and about what is kept on disk
  std::fprintf(stderr, "cujit_gpu_cache_tests: CUJIT_CACHE_DIR=%s\n", cache_dir.c_str());
  const int status = RUN_ALL_TESTS();
  if (const char* keep = std::getenv("CUJIT_TEST_KEEP_CACHE"); keep != nullptr && std::string(keep) == "1") {
    work->keep();
  }
  return status;
}
