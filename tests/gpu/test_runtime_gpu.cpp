// The runtime around the kernels, on a GPU: CUDA graph capture (never tunes
// inside a capture, stays capturable, replays correctly) and every visible
// device. Runs with autotuning on (the default) and a fresh cache directory.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "attention_check.h"
#include "gpu_test_support.h"
#include "jit/cujit.h"
#include "jit/driver.h"

namespace cujit_test {
namespace {

const jit::detail::DriverApi& cu() { return jit::detail::driver(); }

// Owns a stream, a captured graph and its executable instance.
struct CapturedCall {
  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~CapturedCall() {
    if (exec) cu().cuGraphExecDestroy(exec);
    if (graph) cu().cuGraphDestroy(graph);
    if (stream) cu().cuStreamDestroy(stream);
  }
};

AttnCase graph_case(std::int64_t seq) {
  AttnCase c;
  c.dtype = jit::DType::f16;
  c.batch = 2;
  c.heads_q = c.heads_kv = 4;
  c.seq_q = c.seq_k = seq;
  c.head_dim = 64;
  c.mask = Mask::top_left;
  c.lse = false;
  return c;
}

// Captures jit::attention for `c` into a graph (capture `mode`), replays it
// on poisoned output and checks the result against the reference.
void capture_replay_and_check(const AttnCase& c, CUstreamCaptureMode mode, TestRng& rng) {
  AttnInputs in = make_inputs(c, rng);
  TestTensor out = make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});  // poisoned
  CapturedCall call;
  CUJIT_CU_CHECK(cu().cuStreamCreate(&call.stream, CU_STREAM_NON_BLOCKING));
  jit::AttentionOptions options = options_for(c, nullptr);
  options.stream = reinterpret_cast<jit::Stream>(call.stream);

  CUJIT_CU_CHECK(cu().cuStreamBeginCapture(call.stream, mode));
  try {
    jit::attention(in.dq.view, in.dk.view, in.dv.view, out.view, options);
  } catch (...) {
    cu().cuStreamEndCapture(call.stream, &call.graph);
    throw;
  }
  CUJIT_CU_CHECK(cu().cuStreamEndCapture(call.stream, &call.graph));
  ASSERT_NE(call.graph, nullptr);
  CUJIT_CU_CHECK(cu().cuGraphInstantiate(&call.exec, call.graph, 0));
  for (int replay = 0; replay < 3; ++replay) CUJIT_CU_CHECK(cu().cuGraphLaunch(call.exec, call.stream));
  CUJIT_CU_CHECK(cu().cuStreamSynchronize(call.stream));

  const std::vector<float> got = gather_logical(download_storage(out), out.view);
  const ReferenceProblem p = reference_problem(c);
  expect_output_matches(got, reference_attention(p, in.q, in.k, in.v), p);
}

TEST(GraphCapture, FirstCallInsideACaptureDoesNotTuneAndReplays) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const jit::Stats before = jit::stats();
  // A shape never seen in this process: outside a capture it would tune.
  // Relaxed mode, because a first call may still load a module.
  capture_replay_and_check(graph_case(777), CU_STREAM_CAPTURE_MODE_RELAXED, rng);
  EXPECT_EQ(jit::stats().tuning_runs, before.tuning_runs) << "tuned inside a graph capture";

  // The choice made during the capture was not pinned: a plain call tunes.
  AttnCase c = graph_case(777);
  run_and_check(c, rng);
  EXPECT_EQ(jit::stats().tuning_runs, before.tuning_runs + 1);
}

TEST(GraphCapture, WarmedUpCallIsCapturableInGlobalMode) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  AttnCase c = graph_case(300);
  run_and_check(c, rng);  // tunes and loads outside any capture
  const jit::Stats before = jit::stats();
  capture_replay_and_check(c, CU_STREAM_CAPTURE_MODE_GLOBAL, rng);
  EXPECT_EQ(jit::stats().tuning_runs, before.tuning_runs);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);
}

TEST(Threads, ManyThreadsOnANewKeyTuneItOnce) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  AttnCase c = graph_case(3000);  // seq bucket 4096: a tune key no other test here uses
  AttnInputs in = make_inputs(c, rng);
  constexpr int kThreads = 8;
  std::vector<TestTensor> outs;
  for (int t = 0; t < kThreads; ++t) outs.push_back(make_tensor(c.out_layout, c.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim}));
  const jit::Stats before = jit::stats();
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        jit::attention(in.dq.view, in.dk.view, in.dv.view, outs[t].view, options_for(c, nullptr));
        synchronize();
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(jit::stats().tuning_runs, before.tuning_runs + 1) << "threads tuned the same key more than once";
  const ReferenceProblem p = reference_problem(c);
  const ReferenceResult ref = reference_attention(p, in.q, in.k, in.v);
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    expect_output_matches(gather_logical(download_storage(outs[t]), outs[t].view), ref, p);
  }
}

TEST(MultiGpu, EveryVisibleDeviceComputesCorrectly) {
  CUJIT_REQUIRE_GPU();
  int count = 0;
  CUJIT_CU_CHECK(cu().cuDeviceGetCount(&count));
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  std::printf("[          ] %d visible GPU(s)\n", count);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    SCOPED_TRACE("device " + std::to_string(ordinal));
    CUdevice device = 0;
    CUcontext context = nullptr;
    CUJIT_CU_CHECK(cu().cuDeviceGet(&device, ordinal));
    CUJIT_CU_CHECK(cu().cuDevicePrimaryCtxRetain(&context, device));
    CUJIT_CU_CHECK(cu().cuCtxSetCurrent(context));
    EXPECT_EQ(jit::current_target().device_name.empty(), false);
    AttnCase c = graph_case(129);
    c.mask = Mask::bottom_right;
    c.seq_k = 200;
    run_and_check(c, rng);  // buffers, modules and tuning all on this device
    CUJIT_CU_CHECK(cu().cuDevicePrimaryCtxRelease(device));
  }
}

// A tensor in GPU 1's memory while GPU 0's context is current: refused,
// naming the tensor and both GPUs, before anything is launched.
TEST(MultiGpu, TensorOnAnotherGpuIsRefused) {
  CUJIT_REQUIRE_GPU();
  int count = 0;
  CUJIT_CU_CHECK(cu().cuDeviceGetCount(&count));
  if (count < 2) GTEST_SKIP() << "needs two GPUs, " << count << " visible";
  CUdevice devices[2];
  CUcontext contexts[2];
  for (int i = 0; i < 2; ++i) {
    CUJIT_CU_CHECK(cu().cuDeviceGet(&devices[i], i));
    CUJIT_CU_CHECK(cu().cuDevicePrimaryCtxRetain(&contexts[i], devices[i]));
  }
  const Dims4 dims{1, 2, 64, 64};
  CUJIT_CU_CHECK(cu().cuCtxSetCurrent(contexts[1]));
  std::optional<TestTensor> on_gpu1 = make_tensor(Layout::bhsd, jit::DType::f16, dims);
  CUJIT_CU_CHECK(cu().cuCtxSetCurrent(contexts[0]));
  {
    TestTensor q = make_tensor(Layout::bhsd, jit::DType::f16, dims);
    TestTensor out = make_tensor(Layout::bhsd, jit::DType::f16, dims);
    try {
      jit::attention(q.view, q.view, on_gpu1->view, out.view);
      ADD_FAILURE() << "GPU 1's memory was accepted for a launch on GPU 0";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("v is in the memory of GPU 1, but the kernel runs on GPU 0"),
                std::string::npos)
          << e.what();
    }
  }
  CUJIT_CU_CHECK(cu().cuCtxSetCurrent(contexts[1]));
  on_gpu1.reset();  // freed in its own context
  CUJIT_CU_CHECK(cu().cuCtxSetCurrent(contexts[0]));
  for (int i = 0; i < 2; ++i) CUJIT_CU_CHECK(cu().cuDevicePrimaryCtxRelease(devices[i]));
}

}  // namespace
}  // namespace cujit_test
