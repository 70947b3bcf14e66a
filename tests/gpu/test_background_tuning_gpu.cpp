// cujit_gpu_background_tests: CUJIT_AUTOTUNE=background on a GPU. main()
// sets the mode and a fresh cache directory before any cujit call. The
// first call of a new shape class must return a correct result at once (on
// the default config), the tuning runs behind it, and after
// jit::wait_for_background_tuning() the next call runs the recorded winner;
// results match the float64 reference throughout. A caller's graph capture
// in global mode while the tuning runs must still work, and a process that
// exits with a tuning in flight must exit cleanly.
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attention_check.h"
#include "gpu_test_support.h"
#include "jit/cujit.h"
#include "jit/driver.h"

extern char** environ;

namespace cujit_test {
namespace {

const jit::detail::DriverApi& cu() { return jit::detail::driver(); }

AttnCase background_case(std::int64_t seq) {
  AttnCase c;
  c.dtype = jit::DType::f16;
  c.batch = 1;
  c.heads_q = c.heads_kv = 8;
  c.seq_q = c.seq_k = seq;
  c.head_dim = 64;
  c.mask = Mask::none;
  c.lse = true;
  return c;
}

// The winners of the tuning records in the cache directory.
std::vector<nlohmann::json> recorded_winners() {
  std::vector<nlohmann::json> winners;
  const std::filesystem::path dir = std::filesystem::path(std::getenv("CUJIT_CACHE_DIR")) / "tuning";
  if (!std::filesystem::exists(dir)) return winners;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    winners.push_back(nlohmann::json::parse(in).at("winner"));
  }
  return winners;
}

// Runs the case on poisoned output into `out` and checks it and the LSE.
void call_and_check(const AttnCase& c, const AttnInputs& in, const ReferenceResult& ref) {
  TestTensor out = make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
  jit::DeviceBuffer lse(std::size_t(c.batch * c.heads_q * c.seq_q) * sizeof(float));
  poison(lse.data(), lse.size());
  jit::attention(in.dq.view, in.dk.view, in.dv.view, out.view, options_for(c, static_cast<float*>(lse.data())));
  synchronize();
  const ReferenceProblem p = reference_problem(c);
  expect_output_matches(gather_logical(download_storage(out), out.view), ref, p);
  expect_lse_matches(download_f32(lse.data(), std::size_t(c.batch * c.heads_q * c.seq_q)), ref);
}

TEST(BackgroundTuning, FirstCallIsCorrectAndTheWinnerServesOnceTuned) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const AttnCase c = background_case(1000);
  const AttnInputs in = make_inputs(c, rng);
  const ReferenceResult ref = reference_attention(reference_problem(c), in.q, in.k, in.v);
  const jit::Stats before = jit::stats();
  const std::size_t records_before = recorded_winners().size();

  TestTensor out = make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
  auto serving = [&] { return jit::plan_attention(in.dq.view, in.dk.view, in.dv.view, out.view, options_for(c, nullptr)); };
  call_and_check(c, in, ref);  // the default config, while the tuning starts
  const jit::Json fallback = serving().config;
  call_and_check(c, in, ref);  // a second call in flight starts no second tuning
  jit::wait_for_background_tuning();
  EXPECT_EQ(jit::stats().tuning_runs, before.tuning_runs + 1);

  const std::vector<nlohmann::json> winners = recorded_winners();
  ASSERT_EQ(winners.size(), records_before + 1) << "the background tuning wrote no record";
  const jit::AttentionPlan tuned = serving();
  EXPECT_NE(std::find(winners.begin(), winners.end(), tuned.config), winners.end())
      << "after the tuning, calls run " << tuned.variant << ", not the recorded winner";
  std::printf("[          ] first calls ran %s, then %s\n", fallback.dump().c_str(), tuned.config.dump().c_str());
  const jit::Stats tuned_stats = jit::stats();
  call_and_check(c, in, ref);  // the winner, correct
  call_and_check(c, in, ref);
  EXPECT_EQ(jit::stats().tuning_runs, tuned_stats.tuning_runs);
  EXPECT_EQ(jit::stats().nvrtc_compiles, tuned_stats.nvrtc_compiles) << "the swap compiled again";
}

// The caller captures a graph in global mode on its own stream while the
// worker allocates, loads modules and synchronizes its own stream: neither
// may break the other.
TEST(BackgroundTuning, CallersGlobalCaptureWhileTuningRuns) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const AttnCase c = background_case(2500);  // a shape class of its own
  const AttnInputs in = make_inputs(c, rng);
  const ReferenceResult ref = reference_attention(reference_problem(c), in.q, in.k, in.v);
  call_and_check(c, in, ref);  // starts the tuning; this shape is now served without loading anything

  CUstream stream = nullptr;
  CUJIT_CU_CHECK(cu().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  TestTensor out = make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
  jit::AttentionOptions options = options_for(c, nullptr);
  options.stream = reinterpret_cast<jit::Stream>(stream);
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  for (int capture = 0; capture < 20; ++capture) {  // several, so some overlap the tuning
    CUJIT_CU_CHECK(cu().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    jit::attention(in.dq.view, in.dk.view, in.dv.view, out.view, options);
    CUJIT_CU_CHECK(cu().cuStreamEndCapture(stream, &graph));
    CUJIT_CU_CHECK(cu().cuGraphInstantiate(&exec, graph, 0));
    CUJIT_CU_CHECK(cu().cuGraphLaunch(exec, stream));
    CUJIT_CU_CHECK(cu().cuStreamSynchronize(stream));
    cu().cuGraphExecDestroy(exec);
    cu().cuGraphDestroy(graph);
  }
  const ReferenceProblem p = reference_problem(c);
  expect_output_matches(gather_logical(download_storage(out), out.view), ref, p);
  cu().cuStreamDestroy(stream);
  jit::wait_for_background_tuning();
  call_and_check(c, in, ref);
}

// Exit with a tuning in flight: this binary again, told to make one call of
// a new shape class and return from main at once.
TEST(BackgroundTuning, ExitWithATuningInFlightIsClean) {
  CUJIT_REQUIRE_GPU();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  env_text.emplace_back("CUJIT_TEST_EXIT_IN_FLIGHT=1");
  std::vector<char*> envp;
  for (std::string& s : env_text) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = self;
  char* argv[] = {arg0.data(), nullptr};
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WIFEXITED(status)) {
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  std::printf("[          ] the child exited after %.1f s\n", seconds);
  EXPECT_LT(seconds, 120) << "exit waited for the whole tuning";
}

// The child of ExitWithATuningInFlightIsClean.
int exit_in_flight() {
  TestRng rng;
  const AttnCase c = background_case(1777);
  const AttnInputs in = make_inputs(c, rng);
  TestTensor out = make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
  jit::attention(in.dq.view, in.dk.view, in.dv.view, out.view, options_for(c, nullptr));
  synchronize();
  return 0;  // the tuning is still running
}

}  // namespace
}  // namespace cujit_test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (cujit_test::listing_tests_only()) return RUN_ALL_TESTS();
  ::setenv("CUJIT_AUTOTUNE", "background", 1);
  if (std::getenv("CUJIT_TEST_EXIT_IN_FLIGHT") != nullptr) return cujit_test::exit_in_flight();
  char pattern[] = "/tmp/cujit-background-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 2;
  ::setenv("CUJIT_CACHE_DIR", pattern, 1);
  const int result = RUN_ALL_TESTS();
  std::error_code ignored;
  std::filesystem::remove_all(pattern, ignored);
  return result;
}
