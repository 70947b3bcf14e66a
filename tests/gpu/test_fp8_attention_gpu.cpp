// FP8 attention (q, k, v in e4m3 with descale factors, out f16/bf16) on the
// GPU, over the 16-bit suite's grid: lengths, masks, layouts, GQA/MQA and
// the descale layouts. The truth is the float64 reference on the
// dequantized inputs; the bar is 1.5x the error of the fp32 emulation that
// rounds P to e4m3 as the kernels do (fp8_emulation.h). Each case prints its
// errors and those of the 16-bit kernel on the same values: the accuracy
// FP8 costs. Where no kernel serves a case (before sm_89; D = 256 off
// sm_90a) the error is checked instead.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "fp8_emulation.h"
#include "gpu_test_support.h"
#include "jit/attention.h"
#include "jit/error.h"
#include "jit/attention/attention_family.h"
#include "jit/attention/attention_problem.h"

namespace cujit_test {
namespace {

using jit::DType;

// How the cases' descale factors are laid out.
enum class Descales { per_batch_head, per_head, per_tensor };

struct Fp8Case {
  AttnCase attn;  ///< attn.dtype is out's dtype
  Descales descales = Descales::per_batch_head;
};

std::string fp8_case_name(const Fp8Case& c) {
  static const char* const names[] = {"", "_descalePerHead", "_descalePerTensor"};
  return "e4m3_to_" + case_name(c.attn) + names[int(c.descales)];
}
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << fp8_case_name(c); }

std::array<std::int64_t, 2> strides_of(const Fp8Case& c) {
  switch (c.descales) {
    case Descales::per_batch_head: return {c.attn.heads_kv, 1};
    case Descales::per_head: return {0, 1};
    case Descales::per_tensor: return {0, 0};
  }
  return {};
}

bool serves_fp8(const AttnCase& c) { return fp8_attention_served_here(c.head_dim); }

class Fp8AttentionGpu : public ::testing::TestWithParam<Fp8Case> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

// The 16-bit kernel on the dequantized values (rounded to `dtype`), against
// the same reference: its relative L2 error.
double sixteen_bit_error(const AttnCase& c, const Fp8Values& in, const ReferenceResult& ref) {
  auto rounded = [&](const std::vector<float>& x) {
    std::vector<float> r(x.size());
    std::transform(x.begin(), x.end(), r.begin(), [&](float v) { return round_to(c.dtype, v); });
    return r;
  };
  const std::vector<float> q = rounded(in.q_real), k = rounded(in.k_real), v = rounded(in.v_real);
  const Dims4 q_dims{c.batch, c.heads_q, c.seq_q, c.head_dim}, kv_dims{c.batch, c.heads_kv, c.seq_k, c.head_dim};
  const TestTensor dq = make_tensor(Layout::bhsd, c.dtype, q_dims, &q);
  const TestTensor dk = make_tensor(Layout::bhsd, c.dtype, kv_dims, &k);
  const TestTensor dv = make_tensor(Layout::bhsd, c.dtype, kv_dims, &v);
  const TestTensor out = make_tensor(Layout::bhsd, c.dtype, q_dims);
  jit::attention(dq.view, dk.view, dv.view, out.view, options_for(c, nullptr));
  synchronize();
  return compare(gather_logical(download_storage(out), out.view), ref.o).rel_l2;
}

// One case's inputs on the device (quantized from fresh normal values), its
// options, and the truth and the bar its output is held to.
struct Fp8Run {
  Fp8Values in;
  TestTensor q, k, v, out;  // out poisoned
  jit::DeviceBuffer q_descale, k_descale, v_descale, lse;
  jit::AttentionOptions options;
  ReferenceProblem problem;
  ReferenceResult ref;
  ErrorReport emulated;  // the fp32 emulation's error against ref
};

Fp8Run prepare(const Fp8Case& fc, TestRng& rng) {
  const AttnCase& c = fc.attn;
  Fp8Run r;
  r.problem = reference_problem(c);
  const Dims4 q_dims{c.batch, c.heads_q, c.seq_q, c.head_dim}, kv_dims{c.batch, c.heads_kv, c.seq_k, c.head_dim};
  r.in = quantize_fp8(r.problem, rng.normal_vector(std::size_t(count(q_dims)), DType::f16),
                      rng.normal_vector(std::size_t(count(kv_dims)), DType::f16),
                      rng.normal_vector(std::size_t(count(kv_dims)), DType::f16), strides_of(fc));
  r.q = make_tensor(c.q_layout, DType::e4m3, q_dims, &r.in.q);
  r.k = make_tensor(c.kv_layout, DType::e4m3, kv_dims, &r.in.k);
  r.v = make_tensor(c.kv_layout, DType::e4m3, kv_dims, &r.in.v);
  r.out = make_tensor(c.out_layout, c.dtype, q_dims);
  r.q_descale = upload_bytes(r.in.q_descale.data(), r.in.q_descale.size() * sizeof(float));
  r.k_descale = upload_bytes(r.in.k_descale.data(), r.in.k_descale.size() * sizeof(float));
  r.v_descale = upload_bytes(r.in.v_descale.data(), r.in.v_descale.size() * sizeof(float));
  r.lse = jit::DeviceBuffer(c.lse ? std::size_t(c.batch * c.heads_q * c.seq_q) * sizeof(float) : 0);
  poison(r.lse.data(), r.lse.size());
  r.options = options_for(c, static_cast<float*>(r.lse.data()));
  r.options.descale = {static_cast<const float*>(r.q_descale.data()), static_cast<const float*>(r.k_descale.data()),
                       static_cast<const float*>(r.v_descale.data()),
                       fc.descales == Descales::per_batch_head ? std::nullopt : std::optional(strides_of(fc))};
  r.ref = reference_attention(r.problem, r.in.q_real, r.in.k_real, r.in.v_real);
  r.emulated = compare(emulate_fp8_attention(r.problem, r.in, c.dtype), r.ref.o);
  return r;
}

// The output (and LSE) a kernel wrote into r.out, against the bar: 1.5x the
// emulation's error. Returns the output's error.
ErrorReport expect_within_the_emulations_error(const Fp8Case& fc, const Fp8Run& r) {
  // The bar itself must be a real one: P in e4m3 costs a few percent.
  EXPECT_LT(r.emulated.rel_l2, 0.1) << "the emulation is far off the reference: " << r.emulated.describe();
  const std::vector<std::uint16_t> storage = download_storage(r.out);
  const std::vector<float> got = gather_logical(storage, r.out.view);
  expect_output_matches(got, r.ref, r.problem, 1.5 * r.emulated.rel_l2 + 1e-6);
  EXPECT_EQ(count_clobbered_padding(storage, r.out.view), 0)
      << "elements of the output buffer outside the output view were written";
  // Hopper's 8-bit wgmma adds its products with fewer bits than fp32 (the
  // scores of e4m3 values up to 448 come out within about 1e-3, measured),
  // so the LSE gets a looser bound than the 16-bit kernels' 1e-3.
  constexpr double kFp8LseTolerance = 4e-3;
  if (fc.attn.lse) {
    expect_lse_matches(download_f32(r.lse.data(), r.lse.size() / sizeof(float)), r.ref, kFp8LseTolerance);
  }
  return compare(got, r.ref.o);
}

TEST_P(Fp8AttentionGpu, WithinTheEmulationsErrorOfTheReference) {
  const Fp8Case& fc = GetParam();
  const AttnCase& c = fc.attn;
  TestRng rng;
  SCOPED_TRACE(fp8_case_name(fc));
  SCOPED_TRACE(rng.describe());
  const Fp8Run r = prepare(fc, rng);

  if (!serves_fp8(c)) {
    try {
      jit::attention(r.q.view, r.k.view, r.v.view, r.out.view, r.options);
      ADD_FAILURE() << "FP8 attention ran where no kernel serves it";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported) << e.what();
    }
    return;
  }
  jit::attention(r.q.view, r.k.view, r.v.view, r.out.view, r.options);
  synchronize();
  const ErrorReport report = expect_within_the_emulations_error(fc, r);
  std::printf("[fp8] %s: rel_l2 %.3e (emulation %.3e, ratio %.2f; %s kernel on the same values %.3e), max abs %.3e\n",
              fp8_case_name(fc).c_str(), report.rel_l2, r.emulated.rel_l2,
              r.emulated.rel_l2 > 0 ? report.rel_l2 / r.emulated.rel_l2 : 1.0, jit::to_string(c.dtype),
              sixteen_bit_error(c, r.in, r.ref), report.max_abs);
}

std::string param_name(const ::testing::TestParamInfo<Fp8Case>& info) { return fp8_case_name(info.param); }

Fp8Case make_case(DType out, std::int64_t d, std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                  std::int64_t sk, Mask mask) {
  Fp8Case c;
  c.attn.dtype = out;
  c.attn.head_dim = d;
  c.attn.batch = b;
  c.attn.heads_q = hq;
  c.attn.heads_kv = hkv;
  c.attn.seq_q = sq;
  c.attn.seq_k = sk;
  c.attn.mask = mask;
  return c;
}

// Sq x Sk over {1, 17, 128, 1000}, every mask: f16 out at D = 64, bf16 out
// at D = 128. B = 2, Hq = Hkv = 2.
std::vector<Fp8Case> shape_cases() {
  std::vector<Fp8Case> cases;
  const std::int64_t lengths[] = {1, 17, 128, 1000};
  const std::pair<DType, std::int64_t> dtype_dims[] = {{DType::f16, 64}, {DType::bf16, 128}};
  for (const auto& [dtype, d] : dtype_dims)
    for (std::int64_t sq : lengths)
      for (std::int64_t sk : lengths) {
        const std::vector<Mask> masks =
            sq == sk ? std::vector<Mask>{Mask::none, Mask::top_left}
                     : std::vector<Mask>{Mask::none, Mask::top_left, Mask::bottom_right};
        for (Mask mask : masks) cases.push_back(make_case(dtype, d, 2, 2, 2, sq, sk, mask));
      }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, Fp8AttentionGpu, ::testing::ValuesIn(shape_cases()), param_name);

// [B, S, H, D], padded rows (NaN padding in, poisoned padding out) and a mix;
// no LSE.
std::vector<Fp8Case> layout_cases() {
  struct Layouts {
    Layout q, kv, out;
  };
  const Layouts layouts[] = {{Layout::bshd, Layout::bshd, Layout::bshd},
                             {Layout::bhsd_padded, Layout::bhsd_padded, Layout::bhsd_padded},
                             {Layout::bshd, Layout::bhsd_padded, Layout::bhsd}};
  std::vector<Fp8Case> cases;
  for (DType dtype : {DType::f16, DType::bf16})
    for (const Layouts& l : layouts) {
      Fp8Case c = make_case(dtype, dtype == DType::f16 ? 128 : 64, 2, 4, 2, 1000, 1000, Mask::top_left);
      c.attn.q_layout = l.q;
      c.attn.kv_layout = l.kv;
      c.attn.out_layout = l.out;
      c.attn.lse = false;
      cases.push_back(c);
    }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Layouts, Fp8AttentionGpu, ::testing::ValuesIn(layout_cases()), param_name);

// Grouped-query (Hq = 8, Hkv = 2) and multi-query (Hkv = 1), each descale
// layout, one long sequence, and D = 256.
std::vector<Fp8Case> group_and_descale_cases() {
  std::vector<Fp8Case> cases;
  for (std::int64_t hkv : {2, 1})
    for (Mask mask : {Mask::none, Mask::bottom_right}) {
      cases.push_back(make_case(DType::bf16, 128, 2, 8, hkv, 17, 1000, mask));
      cases.push_back(make_case(DType::f16, 64, 2, 8, hkv, 1000, 1000, mask));
    }
  for (Descales descales : {Descales::per_head, Descales::per_tensor})
    for (DType dtype : {DType::f16, DType::bf16}) {
      Fp8Case c = make_case(dtype, 128, 2, 4, 2, 300, 700, Mask::bottom_right);
      c.descales = descales;
      cases.push_back(c);
    }
  cases.push_back(make_case(DType::bf16, 128, 1, 2, 2, 4096, 4096, Mask::top_left));
  // D = 256 (sm_90a only): full, both causal alignments, GQA.
  cases.push_back(make_case(DType::bf16, 256, 2, 2, 2, 1000, 1000, Mask::none));
  cases.push_back(make_case(DType::bf16, 256, 2, 2, 2, 1000, 1000, Mask::top_left));
  cases.push_back(make_case(DType::f16, 256, 2, 8, 2, 17, 1000, Mask::bottom_right));
  cases.push_back(make_case(DType::f16, 256, 1, 4, 1, 1000, 17, Mask::top_left));
  return cases;
}
INSTANTIATE_TEST_SUITE_P(GroupsAndDescales, Fp8AttentionGpu, ::testing::ValuesIn(group_and_descale_cases()),
                         param_name);


// Every FP8 config the tuner may pick (each family's, each key-block size),
// not only the default the cases above run: both masks, ragged edges on
// both sides of a key block, GQA.
class Fp8EveryConfigGpu : public ::testing::TestWithParam<Fp8Case> {
 protected:
  void SetUp() override {
    CUJIT_REQUIRE_GPU();
    if (!serves_fp8(GetParam().attn)) GTEST_SKIP() << "no FP8 kernel for this case here";
  }
};

TEST_P(Fp8EveryConfigGpu, WithinTheEmulationsErrorOfTheReference) {
  const Fp8Case& fc = GetParam();
  TestRng rng;
  SCOPED_TRACE(fp8_case_name(fc));
  SCOPED_TRACE(rng.describe());
  Fp8Run r = prepare(fc, rng);
  const jit::detail::AttnProblem problem =
      jit::detail::validate_attention(r.q.view, r.k.view, r.v.view, r.out.view, r.options);
  const std::array<std::int64_t, 2> strides = strides_of(fc);
  const int configs = for_every_config(problem, [&](const jit::detail::AttentionFamily& family,
                                                    const jit::detail::AttnPlan& plan, void* workspace) {
    poison(r.out.buffer.data(), r.out.buffer.size());
    poison(r.lse.data(), r.lse.size());
    jit::detail::AttnTensors tensors{r.q.view, r.k.view, r.v.view, r.out.view, static_cast<float*>(r.lse.data())};
    tensors.q_descale = static_cast<const float*>(r.q_descale.data());
    tensors.k_descale = static_cast<const float*>(r.k_descale.data());
    tensors.v_descale = static_cast<const float*>(r.v_descale.data());
    tensors.descale_strides = strides;
    family.launch(plan, problem, tensors, workspace, nullptr);
    synchronize();
    expect_within_the_emulations_error(fc, r);
  });
  EXPECT_GT(configs, 0) << "no family serves this FP8 problem here";
}

// D = 256 twice: some configs there store O from registers, not through
// shared memory (smem_layout.h), so a padded output layout and rows past
// the last full block check that store's strides and bounds. Every dense
// config also runs with V staged transposed by its own pass (vt_staged).
std::vector<Fp8Case> every_config_cases() {
  std::vector<Fp8Case> cases = {make_case(DType::bf16, 128, 1, 2, 2, 1000, 1000, Mask::none),
                                make_case(DType::bf16, 128, 1, 2, 2, 1000, 1000, Mask::top_left),
                                make_case(DType::f16, 128, 2, 4, 2, 200, 700, Mask::bottom_right),
                                make_case(DType::f16, 64, 1, 2, 2, 333, 333, Mask::top_left),
                                make_case(DType::bf16, 256, 1, 2, 2, 333, 700, Mask::bottom_right)};
  Fp8Case padded = make_case(DType::f16, 256, 2, 4, 2, 200, 500, Mask::top_left);
  padded.attn.q_layout = Layout::bshd;
  padded.attn.out_layout = Layout::bhsd_padded;
  cases.push_back(padded);
  // K and V token-major ([B, S, Hkv, D]): the staging pass (vt_staged
  // configs) reads V through its strides, GQA 4 and a last block part full.
  Fp8Case token_major = make_case(DType::bf16, 128, 2, 8, 2, 300, 1000, Mask::none);
  token_major.attn.kv_layout = Layout::bshd;
  cases.push_back(token_major);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Configs, Fp8EveryConfigGpu, ::testing::ValuesIn(every_config_cases()), param_name);

}  // namespace
}  // namespace cujit_test
