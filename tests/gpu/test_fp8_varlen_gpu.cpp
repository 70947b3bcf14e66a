// FP8 (e4m3) ragged batches on the GPU (jit/varlen.h with options.descale):
// each sequence quantized with factors of its own ([B, Hkv], one per
// sequence and KV head, as a serving stack quantizes each request), packed
// token-major. The truth is the float64 reference on each sequence's
// dequantized values; the bar, as the dense FP8 tests', 1.5x the error of
// the fp32 emulation that rounds P to e4m3 as the kernels do
// (fp8_emulation.h), over all the sequences' rows. Rows after the last
// sequence must stay untouched. Then every kept config of every family here
// on one mixed batch.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "fp8_emulation.h"
#include "gpu_test_support.h"
#include "jit/attention/attention_problem.h"
#include "jit/error.h"
#include "jit/varlen.h"
#include "reference_attention.h"

namespace cujit_test {
namespace {

using jit::DType;

struct Fp8RaggedCase {
  DType out = DType::bf16;
  std::int64_t head_dim = 128, heads_q = 4, heads_kv = 2;
  std::vector<std::int64_t> lens_q, lens_k;
  Mask mask = Mask::bottom_right;
};

std::string case_name(const Fp8RaggedCase& c) {
  return fmt::format("e4m3_to_{}_d{}_h{}x{}_q{}_k{}_{}", jit::to_string(c.out), c.head_dim, c.heads_q, c.heads_kv,
                     fmt::join(c.lens_q, "_"), fmt::join(c.lens_k, "_"), mask_name(c.mask));
}
void PrintTo(const Fp8RaggedCase& c, std::ostream* os) { *os << case_name(c); }

std::int64_t total(const std::vector<std::int64_t>& lens) {
  return std::accumulate(lens.begin(), lens.end(), std::int64_t{0});
}

// Rows after the last sequence in q, k, v and out.
constexpr std::int64_t kTail = 5;

// A ragged batch's device side, and what its sequences' rows must hold.
struct Fp8RaggedRun {
  std::int64_t rows_q = 0, rows_k = 0;  // packed rows, the tail included
  TestTensor q, k, v, out;              // [1, H, rows, D] over packed [rows, H, D] storage; out poisoned
  jit::DeviceBuffer cu_q, cu_k, q_descale, k_descale, v_descale, lse;
  jit::VarlenBatch batch;
  jit::AttentionOptions options;
  ReferenceProblem problem;  // for expect_output_matches: head_dim
  ReferenceResult ref;       // o [1, Hq, total_q, D], lse and visible keys [Hq, total_q]
  ErrorReport emulated;      // the emulation's error against ref over the same rows
};

Fp8RaggedRun prepare(const Fp8RaggedCase& c, TestRng& rng) {
  const std::int64_t Hq = c.heads_q, Hkv = c.heads_kv, D = c.head_dim, B = std::int64_t(c.lens_q.size());
  const std::int64_t tq = total(c.lens_q), tk = total(c.lens_k);
  Fp8RaggedRun r;
  r.rows_q = tq + kTail;
  r.rows_k = tk + kTail;
  const Dims4 q_dims{1, Hq, r.rows_q, D}, kv_dims{1, Hkv, r.rows_k, D};
  // Stored e4m3 values; the tails hold 1.0 (finite: jit/varlen.h).
  std::vector<float> q(std::size_t(count(q_dims)), 1.f), k(std::size_t(count(kv_dims)), 1.f), v = k;
  std::vector<float> q_descale(std::size_t(B * Hkv)), k_descale = q_descale, v_descale = q_descale;
  std::vector<double> ref_o(std::size_t(Hq * tq * D)), ref_lse(std::size_t(Hq * tq));
  std::vector<std::int64_t> visible(std::size_t(Hq * tq));
  std::vector<float> emulated(std::size_t(Hq * tq * D));

  std::int64_t q0 = 0, k0 = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t lq = c.lens_q[std::size_t(b)], lk = c.lens_k[std::size_t(b)];
    const ReferenceProblem p = sequence_problem(Hq, Hkv, lq, lk, D, c.mask);
    const Fp8Values in = quantize_fp8(p, rng.normal_vector(std::size_t(Hq * lq * D), DType::f16),
                                      rng.normal_vector(std::size_t(Hkv * lk * D), DType::f16),
                                      rng.normal_vector(std::size_t(Hkv * lk * D), DType::f16), {Hkv, 1});
    for (std::int64_t h = 0; h < Hkv; ++h) {
      q_descale[std::size_t(b * Hkv + h)] = in.q_descale[std::size_t(h)];
      k_descale[std::size_t(b * Hkv + h)] = in.k_descale[std::size_t(h)];
      v_descale[std::size_t(b * Hkv + h)] = in.v_descale[std::size_t(h)];
    }
    for (std::int64_t h = 0; h < Hq; ++h)
      for (std::int64_t s = 0; s < lq; ++s)
        for (std::int64_t d = 0; d < D; ++d)
          q[logical_index(q_dims, 0, h, q0 + s, d)] = in.q[logical_index({1, Hq, lq, D}, 0, h, s, d)];
    for (std::int64_t h = 0; h < Hkv; ++h)
      for (std::int64_t s = 0; s < lk; ++s)
        for (std::int64_t d = 0; d < D; ++d) {
          k[logical_index(kv_dims, 0, h, k0 + s, d)] = in.k[logical_index({1, Hkv, lk, D}, 0, h, s, d)];
          v[logical_index(kv_dims, 0, h, k0 + s, d)] = in.v[logical_index({1, Hkv, lk, D}, 0, h, s, d)];
        }
    if (lq > 0) {
      const ReferenceResult rb = reference_attention(p, in.q_real, in.k_real, in.v_real);
      const std::vector<float> eb = emulate_fp8_attention(p, in, c.out);
      for (std::int64_t h = 0; h < Hq; ++h)
        for (std::int64_t s = 0; s < lq; ++s) {
          const std::size_t row = std::size_t(h * tq + q0 + s), src = std::size_t(h * lq + s);
          ref_lse[row] = rb.lse[src];
          visible[row] = rb.visible_keys[src];
          for (std::int64_t d = 0; d < D; ++d) {
            ref_o[row * std::size_t(D) + std::size_t(d)] = rb.o[src * std::size_t(D) + std::size_t(d)];
            emulated[row * std::size_t(D) + std::size_t(d)] = eb[src * std::size_t(D) + std::size_t(d)];
          }
        }
    }
    q0 += lq;
    k0 += lk;
  }
  r.problem.head_dim = D;
  r.ref.o = std::move(ref_o);
  r.ref.lse = std::move(ref_lse);
  r.ref.visible_keys = std::move(visible);
  r.emulated = compare(emulated, r.ref.o);

  r.q = make_tensor(Layout::bshd, DType::e4m3, q_dims, &q);
  r.k = make_tensor(Layout::bshd, DType::e4m3, kv_dims, &k);
  r.v = make_tensor(Layout::bshd, DType::e4m3, kv_dims, &v);
  r.out = make_tensor(Layout::bshd, c.out, q_dims);  // poisoned
  std::vector<std::int32_t> cu_q(std::size_t(B + 1), 0), cu_k = cu_q;
  for (std::size_t b = 0; b < std::size_t(B); ++b) {
    cu_q[b + 1] = cu_q[b] + std::int32_t(c.lens_q[b]);
    cu_k[b + 1] = cu_k[b] + std::int32_t(c.lens_k[b]);
  }
  r.cu_q = upload_bytes(cu_q.data(), cu_q.size() * sizeof(std::int32_t));
  r.cu_k = upload_bytes(cu_k.data(), cu_k.size() * sizeof(std::int32_t));
  r.q_descale = upload_bytes(q_descale.data(), q_descale.size() * sizeof(float));
  r.k_descale = upload_bytes(k_descale.data(), k_descale.size() * sizeof(float));
  r.v_descale = upload_bytes(v_descale.data(), v_descale.size() * sizeof(float));
  r.lse = jit::DeviceBuffer(std::size_t(Hq * r.rows_q) * sizeof(float));
  poison(r.lse.data(), r.lse.size());
  r.batch.cu_seqlens_q = static_cast<const std::int32_t*>(r.cu_q.data());
  r.batch.cu_seqlens_k = static_cast<const std::int32_t*>(r.cu_k.data());
  r.batch.batch = B;
  r.batch.max_seqlen_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  r.batch.max_seqlen_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  r.options.causal = c.mask != Mask::none;
  r.options.align = c.mask == Mask::bottom_right ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  r.options.lse = static_cast<float*>(r.lse.data());
  r.options.descale = {static_cast<const float*>(r.q_descale.data()), static_cast<const float*>(r.k_descale.data()),
                       static_cast<const float*>(r.v_descale.data()), std::nullopt};
  return r;
}

// What the kernel wrote against the bar; returns the output's error over
// the sequences' rows.
ErrorReport expect_within_the_emulations_error(const Fp8RaggedCase& c, const Fp8RaggedRun& r) {
  EXPECT_LT(r.emulated.rel_l2, 0.1) << "the emulation is far off the reference: " << r.emulated.describe();
  const std::vector<std::uint16_t> storage = download_storage(r.out);
  const std::vector<float> all = gather_logical(storage, r.out.view);
  const std::int64_t tq = total(c.lens_q), D = c.head_dim;
  std::vector<float> rows;
  std::int64_t tail_written = 0;
  for (std::int64_t h = 0; h < c.heads_q; ++h)
    for (std::int64_t s = 0; s < r.rows_q; ++s)
      for (std::int64_t d = 0; d < D; ++d) {
        const float x = all[logical_index({1, c.heads_q, r.rows_q, D}, 0, h, s, d)];
        if (s < tq) rows.push_back(x);
        else if (!std::isnan(x)) ++tail_written;
      }
  expect_output_matches(rows, r.ref, r.problem, 1.5 * r.emulated.rel_l2 + 1e-6);
  EXPECT_EQ(tail_written, 0) << "elements of out after the last sequence were written";
  const std::vector<float> lse_all = download_f32(r.lse.data(), std::size_t(c.heads_q * r.rows_q));
  std::vector<float> lse;
  for (std::int64_t h = 0; h < c.heads_q; ++h)
    for (std::int64_t s = 0; s < tq; ++s) lse.push_back(lse_all[std::size_t(h * r.rows_q + s)]);
  constexpr double kFp8LseTolerance = 4e-3;  // as the dense FP8 tests': Hopper's 8-bit wgmma sums
  expect_lse_matches(lse, r.ref, kFp8LseTolerance);
  return compare(rows, r.ref.o);
}

class Fp8RaggedGpu : public ::testing::TestWithParam<Fp8RaggedCase> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

TEST_P(Fp8RaggedGpu, WithinTheEmulationsErrorOfTheReference) {
  const Fp8RaggedCase& c = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  Fp8RaggedRun r = prepare(c, rng);
  if (!fp8_attention_served_here(c.head_dim)) {
    try {
      jit::attention_varlen(r.q.view, r.k.view, r.v.view, r.out.view, r.batch, r.options);
      ADD_FAILURE() << "FP8 attention ran where no kernel serves it";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported) << e.what();
    }
    return;
  }
  jit::attention_varlen(r.q.view, r.k.view, r.v.view, r.out.view, r.batch, r.options);
  synchronize();
  const ErrorReport report = expect_within_the_emulations_error(c, r);
  std::printf("[fp8 ragged] %s: rel_l2 %.3e (emulation %.3e, ratio %.2f), max abs %.3e\n", case_name(c).c_str(),
              report.rel_l2, r.emulated.rel_l2, r.emulated.rel_l2 > 0 ? report.rel_l2 / r.emulated.rel_l2 : 1.0,
              report.max_abs);
}

Fp8RaggedCase make_case(DType out, std::int64_t d, std::int64_t hq, std::int64_t hkv, std::vector<std::int64_t> lq,
                        std::vector<std::int64_t> lk, Mask mask) {
  return {out, d, hq, hkv, std::move(lq), std::move(lk), mask};
}

std::vector<Fp8RaggedCase> cases() {
  std::vector<Fp8RaggedCase> out;
  // Self-attention prefill of mixed lengths (an empty one among them), each
  // head dim FP8 attention takes, every mask.
  const std::vector<std::int64_t> mixed = {1, 17, 128, 300, 0, 64, 1000, 129};
  for (auto [dtype, d] : {std::pair{DType::f16, std::int64_t{64}}, std::pair{DType::bf16, std::int64_t{128}},
                          std::pair{DType::bf16, std::int64_t{256}}})
    for (Mask mask : {Mask::none, Mask::bottom_right}) out.push_back(make_case(dtype, d, 4, 2, mixed, mixed, mask));
  // Appends (new rows against a longer prefix, both alignments), rows that
  // see no key, GQA 4 and MQA.
  for (Mask mask : {Mask::top_left, Mask::bottom_right}) {
    out.push_back(make_case(DType::f16, 128, 8, 2, {5, 130, 64, 1}, {300, 200, 64, 1025}, mask));
    out.push_back(make_case(DType::bf16, 128, 8, 1, {40, 300, 7}, {16, 100, 0}, mask));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, Fp8RaggedGpu, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Fp8RaggedCase>& info) { return case_name(info.param); });

// Every kept FP8 config of every family here on one mixed causal batch.
class Fp8RaggedEveryConfigGpu : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(Fp8RaggedEveryConfigGpu, WithinTheEmulationsErrorOfTheReference) {
  CUJIT_REQUIRE_GPU();
  const Fp8RaggedCase c =
      make_case(DType::bf16, GetParam(), 4, 2, {70, 1, 0, 257, 192, 63}, {70, 300, 5, 257, 192, 63}, Mask::bottom_right);
  if (!fp8_attention_served_here(c.head_dim)) GTEST_SKIP() << "no FP8 kernel for head dim " << c.head_dim << " here";
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  Fp8RaggedRun r = prepare(c, rng);
  const jit::detail::AttnProblem problem =
      jit::detail::validate_attention_varlen(r.q.view, r.k.view, r.v.view, r.out.view, r.batch, r.options);
  const int configs = for_every_config(problem, [&](const jit::detail::AttentionFamily& family,
                                                    const jit::detail::AttnPlan& plan, void* workspace) {
    poison(r.out.buffer.data(), r.out.buffer.size());
    poison(r.lse.data(), r.lse.size());
    jit::detail::AttnTensors t{r.q.view, r.k.view, r.v.view, r.out.view, static_cast<float*>(r.lse.data()), nullptr, 0,
                               nullptr, r.batch.cu_seqlens_q, r.batch.cu_seqlens_k};
    t.q_descale = static_cast<const float*>(r.q_descale.data());
    t.k_descale = static_cast<const float*>(r.k_descale.data());
    t.v_descale = static_cast<const float*>(r.v_descale.data());
    t.descale_strides = {c.heads_kv, 1};
    family.launch(plan, problem, t, workspace, nullptr);
    synchronize();
    expect_within_the_emulations_error(c, r);
  });
  EXPECT_GT(configs, 0) << "no family here serves a ragged FP8 batch of head dim " << c.head_dim;
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Fp8RaggedEveryConfigGpu,
                         ::testing::Values(std::int64_t{64}, std::int64_t{128}, std::int64_t{256}),
                         [](const auto& info) { return fmt::format("d{}", info.param); });

}  // namespace
}  // namespace cujit_test
