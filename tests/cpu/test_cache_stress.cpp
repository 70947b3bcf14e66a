// cujit_cache_stress_tests: 8 processes x 4 threads on one fresh cache
// directory, compiling and reading the same and different keys at once. No
// GPU needed (NVRTC compiles).
//
// The parent starts this binary 8 times (CUJIT_STRESS_CHILD=1, the same new
// CUJIT_CACHE_DIR, which none of them has created yet); the children wait
// for a start file so that they begin together. In each child, 4 threads loop
// twice over a shuffled list of the 10 configs of the row-softmax example
// family (sm_80), calling jit::compile_variant and checking every report. A
// child writes its counters to a result file. Afterwards the parent checks
// the directory: exactly the 10 entries, each decoding; no temp files; and
// the number of NVRTC compiles, summed over the processes, is at most one per
// key per process.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "jit/kernel_family.h"
#include "row_softmax_family.h"
#include "tests/support/file_bytes.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using jit::Json;

constexpr const char* kChildEnv = "CUJIT_STRESS_CHILD";        // the child's index
constexpr const char* kResultEnv = "CUJIT_STRESS_RESULT";      // its result file
constexpr const char* kStartEnv = "CUJIT_STRESS_START";        // the file whose existence says "go"
constexpr const char* kChildSuite = "CacheStressChild";
constexpr const char* kChildTest = "CompileAndReadAllConfigs";

constexpr int kProcesses = 8;
constexpr int kThreads = 4;
constexpr int kPasses = 2;
constexpr int kConfigs = 10;  // the row-softmax config space
constexpr auto kDeadline = std::chrono::seconds(60);

const Json kSpec = {{"dtype", "f32"}};
constexpr const char* kArch = "sm_80";

using cujit_test::slurp;

// ---------------------------------------------------------------------------
// A child: 4 threads x 2 passes x 10 configs.

class StressChild : public ::testing::Test {
 public:
  void TestBody() override {
    const example::RowSoftmaxFamily family;
    const std::vector<Json> configs = family.config_space(kSpec);
    ASSERT_EQ(configs.size(), std::size_t{kConfigs});
    const int index = std::atoi(std::getenv(kChildEnv));

    // Begin together with the other processes (bounded wait).
    if (const char* start = std::getenv(kStartEnv)) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!fs::exists(start) && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }

    std::mutex mutex;
    std::vector<std::string> failures;
    std::atomic<int> calls{0};
    std::vector<int> compiled(configs.size(), 0);  // per config: calls that compiled (from_cache false)
    std::latch ready(kThreads);
    auto worker = [&](int thread) {
      std::mt19937 rng(static_cast<unsigned>(index * kThreads + thread));
      std::vector<std::size_t> order(configs.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      ready.arrive_and_wait();
      for (int pass = 0; pass < kPasses; ++pass) {
        std::shuffle(order.begin(), order.end(), rng);
        for (std::size_t i : order) {
          const Json& config = configs[i];
          try {
            const jit::CompileReport r = jit::compile_variant(family, kSpec, config, kArch);
            ++calls;
            std::string problem;
            if (r.registers <= 0) problem = fmt::format("registers {}", r.registers);
            if (r.variant != family.variant_name(kSpec, config)) problem += " variant " + r.variant;
            if (r.arch != kArch) problem += " arch " + r.arch;
            if (!r.from_cache) {
              // Compiled here: at most once per key in a process (its threads
              // take turns on a key; the later ones find the stored entry).
              std::lock_guard lock(mutex);
              if (++compiled[i] > 1) problem += fmt::format(" compiled {} times in this process", compiled[i]);
            }
            if (!problem.empty()) {
              std::lock_guard lock(mutex);
              failures.push_back(fmt::format("{}: {}", family.variant_name(kSpec, config), problem));
            }
          } catch (const std::exception& e) {
            std::lock_guard lock(mutex);
            failures.push_back(fmt::format("{} threw: {}", family.variant_name(kSpec, config), e.what()));
          }
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    for (std::thread& t : threads) t.join();

    for (const std::string& f : failures) ADD_FAILURE() << f;
    EXPECT_EQ(calls.load(), kThreads * kPasses * kConfigs);
    const jit::Stats s = jit::stats();
    if (const char* path = std::getenv(kResultEnv)) {
      std::ofstream(path) << (HasFailure() ? "failed" : "ok") << ' ' << s.nvrtc_compiles << ' '
                          << s.disk_cache_hits << ' ' << calls.load() << '\n';
    }
  }
};

// ---------------------------------------------------------------------------
// The parent.

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/cujit-stress-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

pid_t spawn_child(int index, const fs::path& cache, const fs::path& result, const fs::path& start,
                  std::string& error) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    error = "cannot resolve /proc/self/exe: " + ec.message();
    return -1;
  }
  std::vector<std::string> args = {exe.string(), fmt::format("--gtest_filter={}.{}", kChildSuite, kChildTest)};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("GTEST_") || entry.starts_with("CUJIT_")) continue;
    env.emplace_back(entry);
  }
  env.push_back(fmt::format("{}={}", kChildEnv, index));
  env.push_back(fmt::format("{}={}", kResultEnv, result.string()));
  env.push_back(fmt::format("{}={}", kStartEnv, start.string()));
  env.push_back(fmt::format("CUJIT_CACHE_DIR={}", cache.string()));
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  if (const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()); rc != 0) {
    error = fmt::format("posix_spawn({}) failed: {}", exe.string(), std::strerror(rc));
    return -1;
  }
  return pid;
}

TEST(CacheStress, EightProcessesOfFourThreadsShareOneFreshDirectory) {
  TempDir work;
  const fs::path cache = work.path() / "cache";  // created by the children, concurrently
  const fs::path start = work.path() / "start";
  const auto began = std::chrono::steady_clock::now();

  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    std::string error;
    const pid_t pid = spawn_child(i, cache, work.path() / fmt::format("result-{}", i), start, error);
    if (pid < 0) {
      ADD_FAILURE() << error;
      break;
    }
    pids.push_back(pid);
  }
  std::ofstream(start) << "go\n";

  // Wait for all of them, within the deadline.
  const auto deadline = began + kDeadline;
  std::vector<int> statuses(pids.size(), 0);
  std::vector<bool> done(pids.size(), false);
  bool timed_out = false;
  while (std::count(done.begin(), done.end(), true) < static_cast<long>(pids.size())) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!done[i] && ::waitpid(pids[i], &statuses[i], WNOHANG) == pids[i]) done[i] = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);  // our own child, by its id
        ::waitpid(pids[i], &statuses[i], 0);
        done[i] = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ASSERT_FALSE(timed_out) << "the processes did not finish in " << kDeadline.count() << " s";
  ASSERT_EQ(pids.size(), std::size_t{kProcesses});

  long long compiles = 0, hits = 0, calls = 0;
  for (int i = 0; i < kProcesses; ++i) {
    SCOPED_TRACE(fmt::format("process {}", i));
    EXPECT_TRUE(WIFEXITED(statuses[i]) && WEXITSTATUS(statuses[i]) == 0) << "it failed; its output is above";
    std::istringstream result(slurp(work.path() / fmt::format("result-{}", i)));
    std::string verdict;
    long long c = -1, h = -1, n = -1;
    result >> verdict >> c >> h >> n;
    EXPECT_EQ(verdict, "ok");
    EXPECT_GE(c, 0);
    // At most one compile per key in a process: its threads take turns on a
    // key, and the later ones find the entry the first one stored.
    EXPECT_LE(c, kConfigs);
    EXPECT_EQ(c + h, n) << "a call was neither a compile nor a disk cache hit";
    compiles += c;
    hits += h;
    calls += n;
  }
  EXPECT_EQ(calls, kProcesses * kThreads * kPasses * kConfigs);
  // Every key compiled at least once (the directory was new), and at most
  // once per process. Processes do not share a compile lock: two of them may
  // compile the same key at the same time and both publish it; each publish
  // is an atomic rename of a complete file, so the last writer wins and
  // readers see one whole entry or the other (the same binary). Hence up to
  // kProcesses compiles per key, not one.
  EXPECT_GE(compiles, kConfigs);
  EXPECT_LE(compiles, kProcesses * kConfigs);
  RecordProperty("nvrtc_compiles", static_cast<int>(compiles));
  RecordProperty("disk_cache_hits", static_cast<int>(hits));
  RecordProperty("seconds", fmt::format("{:.1f}", seconds));
  std::fprintf(stderr, "cache stress: %d processes x %d threads, %lld calls, %lld compiles, %lld hits, %.1f s\n",
               kProcesses, kThreads, calls, compiles, hits, seconds);

  // The directory: exactly the 10 entries, all valid; nothing else left.
  struct stat st {};
  ASSERT_EQ(::lstat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const jit::cache::CacheScan scan = jit::cache::scan_cache(cache);
  const example::RowSoftmaxFamily family;
  std::set<std::string> expected, found;
  for (const Json& config : family.config_space(kSpec)) expected.insert(family.variant_name(kSpec, config));
  const jit::cache::CubinStore store(cache);
  std::size_t cubins = 0;
  for (const jit::cache::CacheFile& f : scan.files) {
    EXPECT_EQ(f.kind, jit::cache::CacheFileKind::cubin) << "unexpected file " << f.relative;
    EXPECT_TRUE(f.regular) << f.relative;
    if (f.kind != jit::cache::CacheFileKind::cubin) continue;
    ++cubins;
    const auto entry = store.load(jit::cache::entry_hex_name(f.relative));
    ASSERT_TRUE(entry.has_value()) << f.relative << " does not decode";
    EXPECT_EQ(entry->meta.value("arch", ""), kArch) << f.relative;
    EXPECT_GT(entry->meta.value("registers", -1), 0) << f.relative;
    found.insert(entry->meta.value("variant", ""));
  }
  EXPECT_EQ(cubins, std::size_t{kConfigs});
  EXPECT_EQ(found, expected);
  const jit::cache::VerifyReport verify = jit::cache::verify_cache(cache, /*remove_bad=*/false);
  EXPECT_EQ(verify.checked_cubins, std::size_t{kConfigs});
  EXPECT_TRUE(verify.bad.empty());
  EXPECT_LT(seconds, 60.0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* child = std::getenv(kChildEnv); child != nullptr && *child != '\0') {
    ::testing::RegisterTest(kChildSuite, kChildTest, nullptr, nullptr, __FILE__, __LINE__,
                            []() -> ::testing::Test* { return new StressChild; });
    GTEST_FLAG_SET(filter, fmt::format("{}.{}", kChildSuite, kChildTest));
  }
  return RUN_ALL_TESTS();
}
