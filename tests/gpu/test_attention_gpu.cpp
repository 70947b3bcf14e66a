// jit::attention on the GPU against the float64 reference (cujit_gpu_tests).
// Every test skips, with the reason, where there is no usable GPU. main() is
// in gpu_test_main.cpp: it gives the process a fresh cache directory and
// CUJIT_AUTOTUNE=off (default config, no tuning) unless told otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attention_check.h"
#include "gpu_test_support.h"
#include "jit/attention.h"
#include "jit/error.h"
#include "jit/kernel_family.h"

namespace cujit_test {
namespace {

using jit::DType;

constexpr DType kDTypes[] = {DType::f16, DType::bf16};

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

class AttentionGpu : public ::testing::TestWithParam<AttnCase> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

TEST_P(AttentionGpu, MatchesReference) {
  TestRng rng;
  run_and_check(GetParam(), rng);
}

std::string param_name(const ::testing::TestParamInfo<AttnCase>& info) { return case_name(info.param); }

// Masks worth running for a shape: top-left and bottom-right coincide when Sq == Sk.
std::vector<Mask> masks_for(std::int64_t sq, std::int64_t sk) {
  if (sq == sk) return {Mask::none, Mask::top_left};
  return {Mask::none, Mask::top_left, Mask::bottom_right};
}

// Sq x Sk over {1, 17, 128, 1000}, every mask: f16 at D = 64 and bf16 at
// D = 128 (the other two pairings are covered below). B = 2, Hq = Hkv = 2.
std::vector<AttnCase> shape_cases() {
  std::vector<AttnCase> cases;
  const std::int64_t lengths[] = {1, 17, 128, 1000};
  const std::pair<DType, std::int64_t> dtype_dims[] = {{DType::f16, 64}, {DType::bf16, 128}};
  for (const auto& [dtype, d] : dtype_dims)
    for (std::int64_t sq : lengths)
      for (std::int64_t sk : lengths)
        for (Mask mask : masks_for(sq, sk)) {
          AttnCase c;
          c.dtype = dtype;
          c.head_dim = d;
          c.batch = 2;
          c.heads_q = c.heads_kv = 2;
          c.seq_q = sq;
          c.seq_k = sk;
          c.mask = mask;
          cases.push_back(c);
        }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionGpu, ::testing::ValuesIn(shape_cases()), param_name);

// Storage layouts: [B, S, H, D], padded rows (whose padding holds NaN on input
// and must stay poisoned on output), and a mix. No LSE, so the null-LSE path
// is covered too.
std::vector<AttnCase> layout_cases() {
  struct Shape {
    std::int64_t sq, sk, d;
    Mask mask;
  };
  const Shape shapes[] = {{17, 1000, 64, Mask::none}, {1000, 1000, 128, Mask::top_left}, {1000, 17, 64, Mask::bottom_right}};
  struct Layouts {
    Layout q, kv, out;
  };
  const Layouts layouts[] = {{Layout::bshd, Layout::bshd, Layout::bshd},
                             {Layout::bhsd_padded, Layout::bhsd_padded, Layout::bhsd_padded},
                             {Layout::bshd, Layout::bhsd_padded, Layout::bhsd}};
  std::vector<AttnCase> cases;
  for (DType dtype : kDTypes)
    for (const Shape& s : shapes)
      for (const Layouts& l : layouts) {
        AttnCase c;
        c.dtype = dtype;
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seq_q = s.sq;
        c.seq_k = s.sk;
        c.head_dim = s.d;
        c.mask = s.mask;
        c.q_layout = l.q;
        c.kv_layout = l.kv;
        c.out_layout = l.out;
        c.lse = false;
        cases.push_back(c);
      }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Layouts, AttentionGpu, ::testing::ValuesIn(layout_cases()), param_name);

// Grouped-query (Hq = 8, Hkv = 2) and multi-query (Hkv = 1) attention.
std::vector<AttnCase> gqa_cases() {
  struct Shape {
    std::int64_t sq, sk, d;
  };
  const Shape shapes[] = {{128, 128, 64}, {17, 1000, 128}, {1000, 1000, 64}};
  std::vector<AttnCase> cases;
  for (DType dtype : kDTypes)
    for (std::int64_t heads_kv : {2, 1})
      for (const Shape& s : shapes)
        for (Mask mask : {Mask::none, Mask::bottom_right}) {
          AttnCase c;
          c.dtype = dtype;
          c.batch = 2;
          c.heads_q = 8;
          c.heads_kv = heads_kv;
          c.seq_q = s.sq;
          c.seq_k = s.sk;
          c.head_dim = s.d;
          c.mask = mask;
          c.q_layout = c.out_layout = heads_kv == 1 ? Layout::bshd : Layout::bhsd;
          cases.push_back(c);
        }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(GroupedQuery, AttentionGpu, ::testing::ValuesIn(gqa_cases()), param_name);

// Long sequences (4096), B = 1 and few heads: not the full cross product.
std::vector<AttnCase> long_cases() {
  std::vector<AttnCase> cases;
  auto add = [&](DType dtype, std::int64_t heads_q, std::int64_t heads_kv, std::int64_t sq, std::int64_t sk,
                 std::int64_t d, Mask mask) {
    AttnCase c;
    c.dtype = dtype;
    c.batch = 1;
    c.heads_q = heads_q;
    c.heads_kv = heads_kv;
    c.seq_q = sq;
    c.seq_k = sk;
    c.head_dim = d;
    c.mask = mask;
    cases.push_back(c);
  };
  for (DType dtype : kDTypes)
    for (std::int64_t d : {64, 128})
      for (Mask mask : {Mask::none, Mask::top_left}) add(dtype, 2, 2, 4096, 4096, d, mask);
  add(DType::f16, 4, 2, 1, 4096, 64, Mask::none);
  add(DType::bf16, 4, 2, 1, 4096, 128, Mask::bottom_right);
  add(DType::f16, 2, 1, 4096, 1, 64, Mask::bottom_right);  // only the last query row sees a key
  add(DType::bf16, 2, 2, 4096, 1, 64, Mask::top_left);
  add(DType::bf16, 2, 1, 17, 4096, 64, Mask::top_left);
  add(DType::f16, 2, 1, 17, 4096, 128, Mask::bottom_right);
  add(DType::f16, 2, 2, 4096, 128, 128, Mask::bottom_right);
  add(DType::bf16, 4, 1, 4096, 1000, 64, Mask::none);
  add(DType::f16, 2, 2, 1000, 4096, 64, Mask::bottom_right);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Long, AttentionGpu, ::testing::ValuesIn(long_cases()), param_name);

// Every head dim with both dtypes, every mask and odd lengths, in both
// layouts: on an sm_90a GPU this is the sm90 family's sweep (with
// CUJIT_FAMILY=portable, the portable family's). D = 256 runs where a family
// serves it (the sm90 family).
class AllHeadDims : public AttentionGpu {
 protected:
  void SetUp() override {
    AttentionGpu::SetUp();
    if (IsSkipped()) return;
    const char* family = std::getenv("CUJIT_FAMILY");
    const bool sm90 = jit::current_target().arch == "sm_90a" && !(family && std::string(family) == "portable");
    if (GetParam().head_dim == 256 && !sm90) GTEST_SKIP() << "no family serves head dim 256 here";
  }
};
TEST_P(AllHeadDims, MatchesReference) {
  TestRng rng;
  run_and_check(GetParam(), rng);
}
std::vector<AttnCase> all_head_dim_cases() {
  std::vector<AttnCase> cases;
  const std::pair<std::int64_t, std::int64_t> lengths[] = {{1, 17}, {17, 1000}, {1000, 1000}, {1000, 17}, {333, 777}};
  for (std::int64_t d : {64, 128, 256})
    for (DType dtype : kDTypes)
      for (const auto& [sq, sk] : lengths)
        for (Mask mask : masks_for(sq, sk)) {
          AttnCase c;
          c.dtype = dtype;
          c.head_dim = d;
          c.batch = 2;
          c.heads_q = 4;
          c.heads_kv = sq == sk ? 4 : 2;
          c.seq_q = sq;
          c.seq_k = sk;
          c.mask = mask;
          if (sq == 17) c.q_layout = c.kv_layout = c.out_layout = Layout::bshd;
          cases.push_back(c);
        }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Dims, AllHeadDims, ::testing::ValuesIn(all_head_dim_cases()), param_name);

// A custom softmax scale: peaked (0.5: logits with a std of about 4 at D = 64)
// and flat (0.02).
std::vector<AttnCase> scale_cases() {
  std::vector<AttnCase> cases;
  for (DType dtype : kDTypes)
    for (float scale : {0.5f, 0.02f})
      for (Mask mask : {Mask::none, Mask::bottom_right}) {
        AttnCase c;
        c.dtype = dtype;
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seq_q = 300;
        c.seq_k = 1000;
        c.head_dim = dtype == DType::f16 ? 64 : 128;
        c.mask = mask;
        c.scale = scale;
        cases.push_back(c);
      }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Scale, AttentionGpu, ::testing::ValuesIn(scale_cases()), param_name);

// ---------------------------------------------------------------------------
// The overload that allocates the output.

TEST_F(GpuTest, LibraryAllocatedOutputIsContiguousAndCorrect) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  AttnCase c;
  c.dtype = DType::bf16;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq_q = 257;
  c.seq_k = 300;
  c.head_dim = 64;
  c.mask = Mask::bottom_right;
  c.q_layout = Layout::bshd;  // the result is contiguous [B, Hq, Sq, D] whatever q's layout
  AttnInputs in = make_inputs(c, rng);
  const std::int64_t rows = c.batch * c.heads_q * c.seq_q;
  jit::DeviceBuffer lse(std::size_t(rows) * sizeof(float));
  poison(lse.data(), lse.size());
  {
    // Best effort at catching unwritten elements: freshly freed, poisoned
    // memory of the same size is often what the next allocation returns.
    jit::DeviceBuffer scratch(std::size_t(rows * c.head_dim) * 2);
    poison(scratch.data(), scratch.size());
  }

  jit::DeviceTensor out = jit::attention(in.dq.view, in.dk.view, in.dv.view,
                                         options_for(c, static_cast<float*>(lse.data())));
  synchronize();

  const Dims4 o_dims{c.batch, c.heads_q, c.seq_q, c.head_dim};
  EXPECT_EQ(out.view.data, out.buffer.data());
  EXPECT_EQ(out.view.dtype, c.dtype);
  EXPECT_EQ(out.view.shape, o_dims);
  EXPECT_EQ(out.view.strides, storage_for(Layout::bhsd, o_dims).strides);
  ASSERT_EQ(out.buffer.size(), std::size_t(count(o_dims)) * 2);

  const std::vector<std::uint16_t> storage = download_u16(out.buffer.data(), out.buffer.size() / 2);
  const std::vector<float> got = gather_logical(storage, out.view);
  const ReferenceProblem p = reference_problem(c);
  const ReferenceResult ref = reference_attention(p, in.q, in.k, in.v);
  expect_output_matches(got, ref, p);
  expect_lse_matches(download_f32(lse.data(), std::size_t(rows)), ref);
}

// ---------------------------------------------------------------------------
// Problems with nothing to compute, and problems whose rows see no key.

bool same_stats(const jit::Stats& a, const jit::Stats& b) {
  return a.nvrtc_compiles == b.nvrtc_compiles && a.disk_cache_hits == b.disk_cache_hits &&
         a.tuning_runs == b.tuning_runs && a.tuning_db_hits == b.tuning_db_hits;
}

// Top-left and bottom-right calls of one shape (Sq != Sk) in one process:
// the two alignments are different problems to the hot path's shape cache
// (the sm90 plan's tile order depends on the alignment), and each call is
// checked against the reference, in both orders of first use.
TEST_F(GpuTest, BothCausalAlignmentsOfOneShapeInOneProcess) {
  TestRng rng;
  for (const auto& [seq_q, seq_k] : {std::pair<std::int64_t, std::int64_t>{512, 2048}, {2048, 512}, {1024, 4096}}) {
    for (const Mask first : {Mask::top_left, Mask::bottom_right}) {
      const Mask second = first == Mask::top_left ? Mask::bottom_right : Mask::top_left;
      for (const Mask mask : {first, second, first}) {
        AttnCase c;
        c.heads_q = c.heads_kv = 2;
        c.seq_q = seq_q;
        c.seq_k = seq_k;
        c.head_dim = 64;
        c.mask = mask;
        SCOPED_TRACE(case_name(c));
        run_and_check(c, rng);
      }
    }
  }
}

TEST_F(GpuTest, EmptyProblemIsANoOp) {
  struct Empty {
    const char* what;
    Dims4 q, kv;
  };
  const Empty empties[] = {
      {"Sq = 0", {1, 2, 0, 64}, {1, 2, 128, 64}},
      {"B = 0", {0, 2, 128, 64}, {0, 2, 128, 64}},
      {"B = 0, GQA, D = 128", {0, 8, 17, 128}, {0, 2, 1000, 128}},
  };
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (const Empty& e : empties) {
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(fmt::format("{}, {}", e.what, jit::to_string(dtype)));
      const std::vector<float> kv_values = rng.normal_vector(std::size_t(count(e.kv)), dtype);
      TestTensor q = make_tensor(Layout::bhsd, dtype, e.q);  // zero elements: a null pointer
      TestTensor k = make_tensor(Layout::bhsd, dtype, e.kv, &kv_values);
      TestTensor v = make_tensor(Layout::bhsd, dtype, e.kv, &kv_values);
      TestTensor out = make_tensor(Layout::bhsd, dtype, e.q);
      // An LSE buffer that a launch could only write into by mistake.
      jit::DeviceBuffer lse(64 * sizeof(float));
      poison(lse.data(), lse.size());
      for (bool causal : {false, true}) {
        jit::AttentionOptions options;
        options.causal = causal;
        options.align = jit::CausalAlign::BottomRight;
        options.lse = static_cast<float*>(lse.data());
        const jit::Stats before = jit::stats();
        EXPECT_NO_THROW(jit::attention(q.view, k.view, v.view, out.view, options));
        jit::DeviceTensor allocated;
        EXPECT_NO_THROW(allocated = jit::attention(q.view, k.view, v.view, options));
        synchronize();
        EXPECT_TRUE(same_stats(before, jit::stats())) << "an empty problem compiled, tuned or loaded a kernel";
        EXPECT_EQ(allocated.view.shape, e.q);
        EXPECT_EQ(allocated.buffer.size(), 0u);
        EXPECT_EQ(allocated.view.numel(), 0);
      }
      for (float x : download_f32(lse.data(), 64)) ASSERT_TRUE(std::isnan(x)) << "the LSE buffer was written";
    }
  }
}

// Sk = 0: every row sees no key, so O is all zeros and the LSE all -inf (the
// documented result for a row that sees no key).
TEST_F(GpuTest, NoKeysGivesZerosAndNegativeInfinityLse) {
  for (DType dtype : kDTypes) {
    for (Mask mask : {Mask::none, Mask::bottom_right}) {
      AttnCase c;
      c.dtype = dtype;
      c.batch = 2;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.seq_q = 130;
      c.seq_k = 0;
      c.head_dim = 64;
      c.mask = mask;
      TestRng rng;
      run_and_check(c, rng);
    }
  }
}

// ---------------------------------------------------------------------------
// Invalid and unsupported arguments are reported as jit::Error, not launched.

void expect_error(jit::ErrorCode code, const std::function<void()>& call, const std::string& mentions) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected jit::Error(" << jit::to_string(code) << ") mentioning '" << mentions
                  << "'";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), code) << "got " << jit::to_string(e.code()) << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos)
        << "message does not mention '" << mentions << "': " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected jit::Error(" << jit::to_string(code) << "), got another exception: " << e.what();
  }
}

TEST_F(GpuTest, InvalidArgumentsThrowInvalidArgument) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const DType dtype = DType::f16;
  const Dims4 q_dims{1, 3, 64, 64};  // 3 query heads over 2 kv heads: not a multiple
  const Dims4 kv_dims{1, 2, 64, 64};
  const std::vector<float> q_values = rng.normal_vector(std::size_t(count(q_dims)), dtype);
  const std::vector<float> kv_values = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  TestTensor q = make_tensor(Layout::bhsd, dtype, q_dims, &q_values);
  TestTensor k = make_tensor(Layout::bhsd, dtype, kv_dims, &kv_values);
  TestTensor v = make_tensor(Layout::bhsd, dtype, kv_dims, &kv_values);
  TestTensor out = make_tensor(Layout::bhsd, dtype, q_dims);  // poisoned

  {
    SCOPED_TRACE("Hq not a multiple of Hkv");
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::attention(q.view, k.view, v.view, out.view); },
                 "multiple");
    expect_error(jit::ErrorCode::InvalidArgument, [&] { (void)jit::attention(q.view, k.view, v.view); }, "multiple");
  }
  // The remaining checks use a valid head count (2 over 2).
  jit::TensorView q2 = q.view;
  q2.shape[1] = 2;
  jit::TensorView out2 = out.view;
  out2.shape[1] = 2;
  {
    SCOPED_TRACE("non-positive scale");
    jit::AttentionOptions options;
    options.scale = -1.0f;
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::attention(q2, k.view, v.view, out2, options); },
                 "scale");
  }
  {
    SCOPED_TRACE("mismatched dtypes");
    jit::TensorView k_bf16 = k.view;
    k_bf16.dtype = DType::bf16;
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::attention(q2, k_bf16, v.view, out2); }, "dtype");
  }
  {
    SCOPED_TRACE("misaligned pointer");
    jit::TensorView q_misaligned = q2;
    q_misaligned.data = static_cast<char*>(q_misaligned.data) + 2;
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::attention(q_misaligned, k.view, v.view, out2); },
                 "aligned");
  }
  {
    SCOPED_TRACE("output overlapping an input");
    expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::attention(q2, k.view, v.view, q2); }, "overlaps");
  }
  synchronize();
  const std::vector<std::uint16_t> storage = download_storage(out);
  std::int64_t written = 0;
  for (std::uint16_t bits : storage) written += bits != kPoison16 ? 1 : 0;
  EXPECT_EQ(written, 0) << "a rejected call wrote to the output";
}

// The hot path reuses what it built for a shape (kernel, launch, TMA maps):
// calls that alternate between buffers and layouts of one shape must each
// read and write their own tensors.
TEST_F(GpuTest, RepeatedCallsFollowTheirBuffersAndLayouts) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  AttnCase c;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq_q = 200;
  c.seq_k = 333;
  c.head_dim = 128;
  c.mask = Mask::bottom_right;
  AttnCase bshd = c;
  bshd.q_layout = bshd.kv_layout = bshd.out_layout = Layout::bshd;
  struct Run {
    AttnInputs in;
    TestTensor out;
  };
  std::vector<Run> runs;
  for (const AttnCase& each : {c, c, bshd}) {
    AttnInputs in = make_inputs(each, rng);
    TestTensor out = make_tensor(each.out_layout, each.dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
    runs.push_back({std::move(in), std::move(out)});
  }
  for (int round = 0; round < 3; ++round) {
    for (std::size_t r = 0; r < runs.size(); ++r) {
      poison(runs[r].out.buffer.data(), runs[r].out.buffer.size());
      jit::attention(runs[r].in.dq.view, runs[r].in.dk.view, runs[r].in.dv.view, runs[r].out.view,
                     options_for(c, nullptr));
      synchronize();
      SCOPED_TRACE(fmt::format("round {}, tensors {}", round, r));
      const ReferenceProblem p = reference_problem(c);
      const ReferenceResult ref = reference_attention(p, runs[r].in.q, runs[r].in.k, runs[r].in.v);
      expect_output_matches(gather_logical(download_storage(runs[r].out), runs[r].out.view), ref, p);
    }
  }
}

TEST_F(GpuTest, HopperUsesTheSm90Family) {
  if (jit::current_target().arch != "sm_90a") GTEST_SKIP() << "not an sm_90a GPU";
  const char* choice = std::getenv("CUJIT_FAMILY");
  const bool portable = choice && std::string(choice) == "portable";
  const Dims4 dims{1, 2, 64, 128};
  TestTensor q = make_tensor(Layout::bhsd, DType::f16, dims);
  TestTensor out = make_tensor(Layout::bhsd, DType::f16, dims);
  const jit::AttentionPlan plan = jit::plan_attention(q.view, q.view, q.view, out.view);
  EXPECT_EQ(plan.family, portable ? "attn_fwd_portable" : "attn_fwd_sm90") << plan.variant;
}

TEST_F(GpuTest, UnsupportedHeadDimThrowsUnsupported) {
  const DType dtype = DType::bf16;
  const Dims4 dims{1, 2, 64, 96};
  TestTensor q = make_tensor(Layout::bhsd, dtype, dims);
  TestTensor k = make_tensor(Layout::bhsd, dtype, dims);
  TestTensor v = make_tensor(Layout::bhsd, dtype, dims);
  TestTensor out = make_tensor(Layout::bhsd, dtype, dims);
  expect_error(jit::ErrorCode::Unsupported, [&] { jit::attention(q.view, k.view, v.view, out.view); }, "head dim");
}

}  // namespace
}  // namespace cujit_test
