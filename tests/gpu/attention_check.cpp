#include "attention_check.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace cujit_test {

const char* mask_name(Mask mask) {
  switch (mask) {
    case Mask::none: return "full";
    case Mask::top_left: return "causalTL";
    case Mask::bottom_right: return "causalBR";
  }
  return "?";
}

namespace {

std::string scale_name(float scale) {
  std::string text = fmt::format("{}", scale);
  for (char& ch : text) {
    if (ch == '.') ch = 'p';
    else if (ch == '-') ch = 'm';
    else if (ch == '+') ch = 'P';
  }
  return text;
}

std::string layout_name(const AttnCase& c) {
  if (c.q_layout == c.kv_layout && c.kv_layout == c.out_layout) return to_string(c.q_layout);
  return fmt::format("q{}_kv{}_o{}", to_string(c.q_layout), to_string(c.kv_layout), to_string(c.out_layout));
}

}  // namespace

std::string case_name(const AttnCase& c) {
  std::string name = fmt::format("{}_d{}_b{}_h{}x{}_sq{}_sk{}_{}_{}", jit::to_string(c.dtype), c.head_dim, c.batch,
                                 c.heads_q, c.heads_kv, c.seq_q, c.seq_k, mask_name(c.mask), layout_name(c));
  if (c.scale) name += "_scale" + scale_name(*c.scale);
  if (!c.lse) name += "_nolse";
  return name;
}

void PrintTo(const AttnCase& c, std::ostream* os) { *os << case_name(c); }

jit::AttentionOptions options_for(const AttnCase& c, float* lse) {
  jit::AttentionOptions o;
  o.causal = c.mask != Mask::none;
  o.align = c.mask == Mask::bottom_right ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  o.scale = c.scale;
  o.stream = nullptr;
  o.lse = lse;
  return o;
}

ReferenceProblem reference_problem(const AttnCase& c) {
  ReferenceProblem p;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.head_dim = c.head_dim;
  p.causal = c.mask != Mask::none;
  p.causal_offset = c.mask == Mask::bottom_right ? c.seq_k - c.seq_q : 0;
  // The library computes the default in double and keeps it as a float.
  p.scale = c.scale ? double(*c.scale) : double(float(1.0 / std::sqrt(double(c.head_dim))));
  return p;
}

ReferenceProblem sequence_problem(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seq_q, std::int64_t seq_k,
                                  std::int64_t head_dim, Mask mask) {
  AttnCase c;
  c.batch = 1;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = head_dim;
  c.mask = mask;
  return reference_problem(c);
}

AttnInputs make_inputs(const AttnCase& c, TestRng& rng) {
  const Dims4 q_dims{c.batch, c.heads_q, c.seq_q, c.head_dim};
  const Dims4 kv_dims{c.batch, c.heads_kv, c.seq_k, c.head_dim};
  AttnInputs in;
  in.q = rng.normal_vector(std::size_t(count(q_dims)), c.dtype);
  in.k = rng.normal_vector(std::size_t(count(kv_dims)), c.dtype);
  in.v = rng.normal_vector(std::size_t(count(kv_dims)), c.dtype);
  in.dq = make_tensor(c.q_layout, c.dtype, q_dims, &in.q);
  in.dk = make_tensor(c.kv_layout, c.dtype, kv_dims, &in.k);
  in.dv = make_tensor(c.kv_layout, c.dtype, kv_dims, &in.v);
  return in;
}

void expect_output_matches(const std::vector<float>& got, const ReferenceResult& ref, const ReferenceProblem& p,
                           double tolerance) {
  const ErrorReport report = compare(got, ref.o);
  EXPECT_EQ(report.non_finite, 0) << "O has NaN/inf elements (NaN: never written, the buffer was poisoned): "
                                  << report.describe();
  EXPECT_LE(report.rel_l2, tolerance) << report.describe();

  // Rows that see no key are defined as exact zeros.
  const std::int64_t D = p.head_dim;
  std::int64_t masked_rows = 0, bad_rows = 0, first_bad = -1;
  for (std::size_t row = 0; row < ref.visible_keys.size(); ++row) {
    if (ref.visible_keys[row] != 0) continue;
    ++masked_rows;
    for (std::int64_t d = 0; d < D; ++d) {
      if (got[row * std::size_t(D) + std::size_t(d)] != 0.0f) {
        if (bad_rows++ == 0) first_bad = std::int64_t(row);
        break;
      }
    }
  }
  EXPECT_EQ(bad_rows, 0) << bad_rows << " of " << masked_rows
                         << " rows that see no key are not all zeros; first is flattened [B, Hq, Sq] row "
                         << first_bad;
}

void expect_lse_matches(const std::vector<float>& got, const ReferenceResult& ref, double tolerance) {
  ASSERT_EQ(got.size(), ref.lse.size());
  std::int64_t bad = 0;
  std::string first;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = ref.lse[i];
    const double have = got[i];
    bool ok;
    if (std::isinf(want)) {
      ok = std::isinf(have) && have < 0;  // a row that sees no key: exactly -inf
    } else {
      const double err = std::abs(have - want);
      ok = std::isfinite(have) && err <= tolerance * std::max(1.0, std::abs(want));
      if (std::isfinite(have)) worst = std::max(worst, err);
    }
    if (!ok && bad++ == 0) first = fmt::format("row {}: got {}, want {}", i, have, want);
  }
  EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " LSE values are off (first: " << first
                    << "); max abs error over finite values " << worst;
}

void run_and_check(const AttnCase& c, TestRng& rng) {
  SCOPED_TRACE(case_name(c));
  SCOPED_TRACE(rng.describe());
  AttnInputs in = make_inputs(c, rng);
  const Dims4 o_dims{c.batch, c.heads_q, c.seq_q, c.head_dim};
  TestTensor out = make_tensor(c.out_layout, c.dtype, o_dims);  // poisoned
  const std::int64_t lse_count = c.batch * c.heads_q * c.seq_q;
  jit::DeviceBuffer lse(c.lse ? std::size_t(lse_count) * sizeof(float) : 0);
  poison(lse.data(), lse.size());

  jit::attention(in.dq.view, in.dk.view, in.dv.view, out.view, options_for(c, static_cast<float*>(lse.data())));
  synchronize();

  const std::vector<std::uint16_t> storage = download_storage(out);
  const std::vector<float> got = gather_logical(storage, out.view);
  const ReferenceProblem p = reference_problem(c);
  const ReferenceResult ref = reference_attention(p, in.q, in.k, in.v);
  expect_output_matches(got, ref, p);
  EXPECT_EQ(count_clobbered_padding(storage, out.view), 0)
      << "elements of the output buffer outside the output view were written";
  if (c.lse) expect_lse_matches(download_f32(lse.data(), std::size_t(lse_count)), ref);
}

}  // namespace cujit_test
