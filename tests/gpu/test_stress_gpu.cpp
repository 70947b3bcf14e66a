// cujit_gpu_stress_tests: many processes, threads and streams calling
// jit::attention at once on one fresh cache, and output bits compared across
// processes.
//
// Both tests start this binary again as children (CUJIT_GPU_STRESS_CHILD
// names the child's job): cujit resolves its cache directory and reads its
// knobs once per process, and cross-process behaviour (the tuning lock, cubin
// publishing, NVRTC output) can only be seen from separate processes.
//
//   Stress:      8 processes x 4 threads, each thread on its own stream, loop
//                over 6 shapes; every result checked against the float64
//                reference. Even processes tune (CUJIT_AUTOTUNE unset: full,
//                the default), odd ones use default configs (off): tuning is a
//                per-process knob, so this is how some keys see tuning and
//                untuned use racing on the same directory.
//   Determinism: the output bits of every config of every family this GPU
//                runs, on 3 problems, computed here and in two other
//                processes with caches of their own (so each compiles its own
//                cubins), must be identical.
//
// main() sets CUJIT_AUTOTUNE=off and a fresh CUJIT_CACHE_DIR for this process
// (the determinism test computes its reference bits here). Without a GPU both
// tests are skipped.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "autotune/prune.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "gpu_test_support.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/attention_problem.h"
#include "jit/cujit.h"
#include "jit/driver.h"
#include "tests/support/file_bytes.h"

extern char** environ;

namespace cujit_test {
namespace {

namespace fs = std::filesystem;
using jit::DType;
using Clock = std::chrono::steady_clock;

constexpr const char* kChildEnv = "CUJIT_GPU_STRESS_CHILD";  // "stress" or "digest"
constexpr const char* kIndexEnv = "CUJIT_GPU_STRESS_INDEX";  // the child's number
constexpr const char* kOutEnv = "CUJIT_GPU_STRESS_OUT";      // its result file
constexpr const char* kLogEnv = "CUJIT_GPU_STRESS_LOG";      // where its stderr (cujit's log) goes
constexpr const char* kReadyEnv = "CUJIT_GPU_STRESS_READY";  // created by the child once set up
constexpr const char* kStartEnv = "CUJIT_GPU_STRESS_START";  // created by the parent: "go"

constexpr int kProcesses = 8;
constexpr int kThreads = 4;
constexpr int kPasses = 3;
// Deadlines, multiplied by CUJIT_TEST_DEADLINE_SCALE (an integer, default 1):
// under compute-sanitizer every launch and driver call is many times slower.
std::chrono::seconds scaled(int seconds) {
  const char* value = std::getenv("CUJIT_TEST_DEADLINE_SCALE");
  const int scale = value != nullptr && std::atoi(value) > 1 ? std::atoi(value) : 1;
  return std::chrono::seconds(seconds * scale);
}
const auto kStressDeadline = scaled(90);
const auto kDigestDeadline = scaled(180);  // each child compiles every config of 3 specializations
const auto kStartDeadline = scaled(60);

const jit::detail::DriverApi& cu() { return jit::detail::driver(); }

bool wait_for_file(const fs::path& p, Clock::time_point give_up) {
  while (!fs::exists(p)) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

AttnCase make_case(DType dtype, std::int64_t d, Mask mask, std::int64_t b, std::int64_t hq, std::int64_t hkv,
                   std::int64_t sq, std::int64_t sk) {
  AttnCase c;
  c.dtype = dtype;
  c.head_dim = d;
  c.mask = mask;
  c.batch = b;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.seq_q = sq;
  c.seq_k = sk;
  c.lse = false;
  return c;
}

// ---------------------------------------------------------------------------
// Spawning and reaping copies of this binary.

// Starts this binary with the parent's environment minus GTEST_* and CUJIT_*
// (main() set CUJIT_* for this process only), plus `extra`. With `stderr_to`,
// the child's stderr goes to that file.
pid_t spawn_self(const std::vector<std::string>& extra, const std::optional<fs::path>& stderr_to) {
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  std::vector<std::string> args = {exe.string()};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("GTEST_") && !entry.starts_with("CUJIT_")) env.emplace_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stderr_to) posix_spawn_file_actions_addopen(&actions, 2, stderr_to->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(fmt::format("posix_spawn({}): {}", exe.string(), std::strerror(rc)));
  return pid;
}

// True once `pid` has exited; it stays unreaped (WNOWAIT) for reap().
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Waits for every child until `deadline`; kills (by pid, our own children)
// those still running then. Returns "" for a clean exit, else what happened.
std::vector<std::string> reap(const std::vector<pid_t>& pids, Clock::time_point deadline) {
  std::vector<std::string> outcome(pids.size());
  std::vector<bool> done(pids.size(), false);
  auto describe = [](int status) -> std::string {
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : fmt::format("exit code {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return "stopped";
  };
  while (std::count(done.begin(), done.end(), true) < static_cast<long>(pids.size())) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (!done[i] && ::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        outcome[i] = describe(status);
      }
    }
    if (Clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        done[i] = true;
        outcome[i] = "still running at the deadline (killed)";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return outcome;
}

// ---------------------------------------------------------------------------
// Stress: the shapes. Four tune keys every process shares, two that are its
// own (tune keys hold dtype, D, causal and power-of-two buckets of Sq, Sk and
// B*Hq: process p's own shapes differ from all others in a bucket).

std::vector<AttnCase> stress_cases(int process) {
  const std::int64_t own_heads = std::int64_t{1} << process;             // B*Hq bucket 1..128
  const std::int64_t own_sk = std::vector<std::int64_t>{33, 100, 200, 333}[process % 4];  // Sk bucket 64..512
  const std::int64_t own_sq = process < 4 ? 17 : 100;                     // Sq bucket 64 or 128
  return {
      make_case(DType::f16, 64, Mask::top_left, 2, 4, 4, 333, 333),
      make_case(DType::bf16, 128, Mask::none, 1, 4, 2, 100, 333),  // GQA
      make_case(DType::f16, 128, Mask::bottom_right, 1, 2, 2, 17, 100),
      make_case(DType::bf16, 64, Mask::none, 2, 2, 2, 17, 17),
      make_case(DType::f16, 64, Mask::top_left, 1, own_heads, 1, 100, 100),  // MQA from process 1 on
      make_case(DType::bf16, 128, Mask::none, 1, 2, 2, own_sq, own_sk),
  };
}
constexpr int kSharedKeys = 4;
constexpr int kOwnKeys = 2;
bool tunes(int process) { return process % 2 == 0; }

// The variants this process may compile: each problem's default config, and
// every unpruned config of its spec when it tunes.
std::set<std::string> allowed_variants(const std::vector<jit::detail::AttnProblem>& problems, bool tuning) {
  const jit::Target target = jit::current_target();
  std::set<std::string> names;
  for (const jit::detail::AttnProblem& problem : problems) {
    const auto& family = jit::detail::attention_family_for(problem, target);
    const jit::Json spec = family.spec_for(problem);
    names.insert(family.variant_name(spec, family.default_config(spec, target)));
    for (const auto& companion : family.companions(spec)) {
      names.insert(companion.family->variant_name(companion.spec, companion.config));
    }
    if (!tuning) continue;
    for (const jit::Json& config : jit::autotune::prune_space(family, spec, target).kept) {
      names.insert(family.variant_name(spec, config));
    }
  }
  return names;
}

// What cujit's log (CUJIT_LOG=info) says this process compiled and tuned:
// "compiling <variant> for <arch> with NVRTC" and "tuned <key>: ...".
struct LogCounts {
  std::map<std::string, int> compiled, tuned;
};
LogCounts read_log(const fs::path& log) {
  LogCounts counts;
  std::istringstream lines(slurp(log));
  for (std::string line; std::getline(lines, line);) {
    if (const auto at = line.find("] compiling "); at != std::string::npos) {
      const std::string rest = line.substr(at + 12);
      ++counts.compiled[rest.substr(0, rest.find(" for "))];
    } else if (const auto t = line.find("] tuned {"); t != std::string::npos) {
      const std::string rest = line.substr(t + 8);
      ++counts.tuned[rest.substr(0, rest.find("}: ") + 1)];  // the key: JSON without spaces
    }
  }
  return counts;
}

// One child: set up (inputs, references, streams, outputs), say ready, wait
// for "go", then 4 threads call jit::attention and check every result.
void stress_child() {
  const int index = std::atoi(std::getenv(kIndexEnv));
  const bool tuning = tunes(index);
  const std::vector<AttnCase> cases = stress_cases(index);
  ensure_context();

  TestRng rng(1000 + std::uint64_t(index));
  std::vector<AttnInputs> inputs;
  std::vector<ReferenceProblem> problems;
  std::vector<ReferenceResult> references;  // once per shape, shared by the threads
  for (const AttnCase& c : cases) {
    inputs.push_back(make_inputs(c, rng));
    problems.push_back(reference_problem(c));
    references.push_back(reference_attention(problems.back(), inputs.back().q, inputs.back().k, inputs.back().v));
  }
  struct Worker {
    CUstream stream = nullptr;
    std::vector<TestTensor> outs;  // one per shape
  };
  std::vector<Worker> workers(kThreads);
  for (Worker& w : workers) {
    CUJIT_CU_CHECK(cu().cuStreamCreate(&w.stream, CU_STREAM_NON_BLOCKING));
    for (const AttnCase& c : cases) {
      w.outs.push_back(make_tensor(Layout::bhsd, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim}));
    }
  }
  std::vector<jit::detail::AttnProblem> attn_problems;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    attn_problems.push_back(jit::detail::validate_attention(inputs[i].dq.view, inputs[i].dk.view, inputs[i].dv.view,
                                                            workers[0].outs[i].view, options_for(cases[i], nullptr)));
  }
  const std::set<std::string> allowed = allowed_variants(attn_problems, tuning);

  std::ofstream(std::getenv(kReadyEnv)) << "ready\n";
  ASSERT_TRUE(wait_for_file(std::getenv(kStartEnv), Clock::now() + kStartDeadline)) << "no start signal";

  std::atomic<int> calls{0};
  std::latch together(kThreads);
  auto work = [&](int t) {
    ensure_context();  // the primary context, current on this thread too
    Worker& w = workers[t];
    std::mt19937 order_rng(unsigned(index * kThreads + t));
    std::vector<std::size_t> order(cases.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    together.arrive_and_wait();
    for (int pass = 0; pass < kPasses; ++pass) {
      std::shuffle(order.begin(), order.end(), order_rng);
      for (std::size_t i : order) {
        const AttnCase& c = cases[i];
        SCOPED_TRACE(fmt::format("thread {} pass {} {}", t, pass, case_name(c)));
        TestTensor& out = w.outs[i];
        try {
          // Poisoned before every call, so a launch that writes nothing fails.
          CUJIT_CU_CHECK(cu().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(out.buffer.data()), 0xFF,
                                              out.buffer.size(), w.stream));
          jit::AttentionOptions options = options_for(c, nullptr);
          options.stream = reinterpret_cast<jit::Stream>(w.stream);
          jit::attention(inputs[i].dq.view, inputs[i].dk.view, inputs[i].dv.view, out.view, options);
          CUJIT_CU_CHECK(cu().cuStreamSynchronize(w.stream));
          ++calls;
          expect_output_matches(gather_logical(download_storage(out), out.view), references[i], problems[i]);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "threw: " << e.what();
        }
        if (::testing::Test::HasFailure()) return;  // one report is enough
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (std::thread& t : threads) t.join();
  for (Worker& w : workers) cu().cuStreamDestroy(w.stream);

  // Each key compiled at most once here (threads take turns on a key; later
  // ones read the stored entry), and only variants this process can need;
  // each tune key tuned at most once (one tuning at a time per process).
  const jit::Stats s = jit::stats();
  const LogCounts log = read_log(std::getenv(kLogEnv));
  long long logged_compiles = 0;
  for (const auto& [variant, n] : log.compiled) {
    logged_compiles += n;
    EXPECT_EQ(n, 1) << variant << " compiled " << n << " times in one process";
    EXPECT_TRUE(allowed.contains(variant)) << variant << " is not a variant these shapes need";
  }
  EXPECT_EQ(logged_compiles, s.nvrtc_compiles) << "the log and jit::stats() disagree on compiles";
  long long logged_tunings = 0;
  for (const auto& [key, n] : log.tuned) {
    logged_tunings += n;
    EXPECT_EQ(n, 1) << key << " tuned " << n << " times in one process";
  }
  EXPECT_EQ(logged_tunings, s.tuning_runs) << "the log and jit::stats() disagree on tuning runs";
  if (!tuning) {
    EXPECT_EQ(s.tuning_runs, 0) << "tuned with CUJIT_AUTOTUNE=off";
  }
  EXPECT_EQ(calls.load(), kThreads * kPasses * int(cases.size()));
  std::ofstream(std::getenv(kOutEnv)) << (::testing::Test::HasFailure() ? "failed" : "ok") << ' ' << s.nvrtc_compiles
                                      << ' ' << s.disk_cache_hits << ' ' << s.tuning_runs << ' ' << calls.load()
                                      << '\n';
}

TEST(GpuStress, EightProcessesOfFourThreadsOnOneFreshCache) {
  CUJIT_REQUIRE_GPU();
  TempDir work("cujit_gpu_stress");
  const fs::path cache = work.path() / "cache";  // created by the children, concurrently
  const fs::path start = work.path() / "start";
  const auto began = Clock::now();
  const auto deadline = began + kStressDeadline;

  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    std::vector<std::string> env = {
        fmt::format("{}=stress", kChildEnv),
        fmt::format("{}={}", kIndexEnv, i),
        fmt::format("{}={}", kOutEnv, (work.path() / fmt::format("result-{}", i)).string()),
        fmt::format("{}={}", kLogEnv, (work.path() / fmt::format("log-{}", i)).string()),
        fmt::format("{}={}", kReadyEnv, (work.path() / fmt::format("ready-{}", i)).string()),
        fmt::format("{}={}", kStartEnv, start.string()),
        fmt::format("CUJIT_CACHE_DIR={}", cache.string()),
        "CUJIT_LOG=info",  // what each child compiled and tuned, per key
    };
    if (!tunes(i)) env.push_back("CUJIT_AUTOTUNE=off");
    try {
      pids.push_back(spawn_self(env, work.path() / fmt::format("log-{}", i)));
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      break;  // the ones started still get "go" and are reaped
    }
  }
  // Start together once all are set up (a child that died is not waited for).
  for (std::size_t i = 0; i < pids.size(); ++i) {
    while (!fs::exists(work.path() / fmt::format("ready-{}", i)) && Clock::now() < deadline && !has_exited(pids[i])) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::ofstream(start) << "go\n";
  const std::vector<std::string> outcome = reap(pids, deadline);
  const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
  ASSERT_EQ(pids.size(), std::size_t{kProcesses});

  long long compiles = 0, hits = 0, tunings = 0, calls = 0;
  for (int i = 0; i < kProcesses; ++i) {
    SCOPED_TRACE(fmt::format("process {} (CUJIT_AUTOTUNE={})", i, tunes(i) ? "full" : "off"));
    EXPECT_EQ(outcome[i], "") << "its gtest output is above; cujit's log: "
                              << (work.path() / fmt::format("log-{}", i)).string();
    std::istringstream result(slurp(work.path() / fmt::format("result-{}", i)));
    std::string verdict;
    long long c = -1, h = -1, t = -1, n = -1;
    result >> verdict >> c >> h >> t >> n;
    EXPECT_EQ(verdict, "ok");
    compiles += c;
    hits += h;
    tunings += t;
    calls += n;
  }
  const int tuned_keys = kSharedKeys + kOwnKeys * ((kProcesses + 1) / 2);  // even processes tune
  EXPECT_EQ(calls, kProcesses * kThreads * kPasses * (kSharedKeys + kOwnKeys));
  // One tuning per key per cache directory: the others wait on its lock and
  // read the record.
  EXPECT_EQ(tunings, tuned_keys) << "tuning runs summed over the processes";

  const jit::cache::VerifyReport verify = jit::cache::verify_cache(cache, /*remove_bad=*/false);
  for (const auto& bad : verify.bad) ADD_FAILURE() << "bad cache entry " << bad.relative << ": " << bad.reason;
  EXPECT_GT(verify.checked_cubins, 0u);
  EXPECT_EQ(verify.checked_tuning, std::size_t(tuned_keys)) << "one tuning record per tuned key";
  EXPECT_EQ(jit::cache::cache_stats(cache).temp_files, 0u) << "a writer's temp file was left";
  std::fprintf(stderr, "gpu stress: %d processes x %d threads, %lld calls, %lld compiles, %lld disk hits, "
               "%lld tunings, %zu cubins, %.1f s\n", kProcesses, kThreads, calls, compiles, hits, tunings,
               verify.checked_cubins, seconds);
  RecordProperty("seconds", fmt::format("{:.1f}", seconds));
  if (::testing::Test::HasFailure()) {
    work.keep();  // each child's log and the cache, for a look
    std::fprintf(stderr, "gpu stress: kept %s\n", work.path().c_str());
  }
}

// ---------------------------------------------------------------------------
// Determinism across processes: fixed seeds, every config of every family
// this GPU runs, output bits.

std::vector<AttnCase> digest_cases() {
  std::vector<AttnCase> cases = {
      make_case(DType::f16, 64, Mask::top_left, 2, 4, 4, 333, 333),
      make_case(DType::bf16, 128, Mask::none, 1, 4, 4, 100, 777),
      make_case(DType::f16, 128, Mask::bottom_right, 2, 8, 2, 200, 300),  // GQA
  };
  for (AttnCase& c : cases) c.lse = true;
  return cases;
}

// One line per case and config: the case's name, the variant and SHA-256 of
// O's and the LSE's bytes. With `check`, each output is also compared with
// the reference (bit-identical garbage would pass the comparison of digests).
std::string digest_lines(bool check) {
  std::string lines;
  std::uint64_t seed = 7;
  for (const AttnCase& c : digest_cases()) {
    SCOPED_TRACE(case_name(c));
    TestRng rng(seed++);
    AttnInputs in = make_inputs(c, rng);
    TestTensor out = make_tensor(Layout::bhsd, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
    const std::size_t lse_count = std::size_t(c.batch * c.heads_q * c.seq_q);
    jit::DeviceBuffer lse(lse_count * sizeof(float));
    const jit::AttentionOptions options = options_for(c, static_cast<float*>(lse.data()));
    const jit::detail::AttnProblem problem =
        jit::detail::validate_attention(in.dq.view, in.dk.view, in.dv.view, out.view, options);
    std::optional<ReferenceResult> ref;
    const ReferenceProblem p = reference_problem(c);
    if (check) ref = reference_attention(p, in.q, in.k, in.v);
    for (const auto* family : families_here()) {
      if (!family->supports(problem, jit::current_target())) continue;
      const jit::Json spec = family->spec_for(problem);
      const std::vector<jit::Json> configs = kept_configs(*family, spec);
      load_all(*family, spec, configs);
      for (const jit::Json& config : configs) {
        SCOPED_TRACE(family->variant_name(spec, config));
        poison(out.buffer.data(), out.buffer.size());
        poison(lse.data(), lse.size());
        const jit::detail::AttnPlan plan = jit::detail::load_plan(*family, problem, config, jit::current_target());
        jit::DeviceBuffer workspace(plan.workspace_bytes);
        family->launch(plan, problem, {in.dq.view, in.dk.view, in.dv.view, out.view, static_cast<float*>(lse.data())},
                       workspace.data(), nullptr);
        synchronize();
        const std::vector<std::uint16_t> o_bits = download_storage(out);
        const std::vector<float> lse_values = download_f32(lse.data(), lse_count);
        auto sha = [](const auto& v) {
          return jit::cache::sha256_hex(
              std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0])));
        };
        lines += fmt::format("{} {} o:{} lse:{}\n", case_name(c), family->variant_name(spec, config), sha(o_bits),
                             sha(lse_values));
        if (check) {
          expect_output_matches(gather_logical(o_bits, out.view), *ref, p);
          expect_lse_matches(lse_values, *ref);
        }
      }
    }
  }
  return lines;
}

void digest_child() { std::ofstream(std::getenv(kOutEnv)) << digest_lines(false); }

TEST(CrossProcessDeterminism, EveryConfigGivesTheSameBitsInOtherProcesses) {
  CUJIT_REQUIRE_GPU();
  TempDir work("cujit_gpu_digest");
  // Two children, each with a cache of its own: each compiles its own cubins.
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    pids.push_back(spawn_self({fmt::format("{}=digest", kChildEnv),
                               fmt::format("{}={}", kOutEnv, (work.path() / fmt::format("digest-{}", i)).string()),
                               fmt::format("CUJIT_CACHE_DIR={}", (work.path() / fmt::format("cache-{}", i)).string())},
                              std::nullopt));
  }
  std::string here;
  try {
    here = digest_lines(true);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "in this process: " << e.what();  // still reap the children
  }
  const std::vector<std::string> outcome = reap(pids, Clock::now() + kDigestDeadline);
  RecordProperty("digests", int(std::count(here.begin(), here.end(), '\n')));
  for (std::size_t i = 0; i < pids.size(); ++i) {
    SCOPED_TRACE(fmt::format("child {}", i));
    ASSERT_EQ(outcome[i], "") << "its gtest output is above";
    EXPECT_EQ(slurp(work.path() / fmt::format("digest-{}", i)), here)
        << "the output bits differ between processes (name, variant, SHA-256 of O and LSE per line)";
  }
}

// A child's job, registered only in a child (so test discovery lists only the
// two tests above).
class ChildJob : public ::testing::Test {
 public:
  void TestBody() override {
    if (std::string_view(std::getenv(kChildEnv)) == "stress") stress_child();
    else digest_child();
  }
};

}  // namespace
}  // namespace cujit_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* child = std::getenv(cujit_test::kChildEnv); child != nullptr && *child != '\0') {
    ::testing::RegisterTest("GpuStressChild", child, nullptr, nullptr, __FILE__, __LINE__,
                            []() -> ::testing::Test* { return new cujit_test::ChildJob; });
    GTEST_FLAG_SET(filter, std::string("GpuStressChild.") + child);
    return RUN_ALL_TESTS();
  }
  if (cujit_test::listing_tests_only()) return RUN_ALL_TESTS();
  // This process: default configs, and a cache of its own (knobs are read
  // once, on first use, so before any test runs).
  std::optional<cujit_test::TempDir> temp;
  try {
    temp.emplace("cujit_gpu_stress_tests");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujit_gpu_stress_tests: %s\n", e.what());
    return 1;
  }
  ::setenv("CUJIT_CACHE_DIR", (temp->path() / "cache").c_str(), 1);
  ::setenv("CUJIT_AUTOTUNE", "off", 1);
  return RUN_ALL_TESTS();
}
