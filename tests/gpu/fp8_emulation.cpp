#include "fp8_emulation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu_test_support.h"
#include "jit/device.h"

namespace cujit_test {
namespace {

constexpr float kE4m3Max = 448.f;

// One tensor [B, H, S, D] quantized against factors over (b, h / group).
void quantize(const std::vector<float>& x, std::int64_t batch, std::int64_t heads, std::int64_t group,
              std::int64_t rows_d, const std::array<std::int64_t, 2>& strides, std::int64_t factors,
              std::vector<float>& stored, std::vector<float>& descale, std::vector<float>& real) {
  std::vector<float> amax(std::size_t(factors), 0.f);
  auto factor_of = [&](std::int64_t b, std::int64_t h) {
    return std::size_t(b * strides[0] + (h / group) * strides[1]);
  };
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < rows_d; ++i) {
        const float value = x[std::size_t((b * heads + h) * rows_d + i)];
        amax[factor_of(b, h)] = std::max(amax[factor_of(b, h)], std::abs(value));
      }
  descale.resize(amax.size());
  for (std::size_t i = 0; i < amax.size(); ++i) descale[i] = amax[i] > 0 ? amax[i] / kE4m3Max : 1.f;
  stored.resize(x.size());
  real.resize(x.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h) {
      const float factor = descale[factor_of(b, h)];
      for (std::int64_t i = 0; i < rows_d; ++i) {
        const std::size_t at = std::size_t((b * heads + h) * rows_d + i);
        stored[at] = round_to(jit::DType::e4m3, x[at] / factor);
        real[at] = stored[at] * factor;
      }
    }
}

}  // namespace

Fp8Values quantize_fp8(const ReferenceProblem& p, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, const std::array<std::int64_t, 2>& strides) {
  Fp8Values out;
  out.strides = strides;
  const std::int64_t factors = std::max<std::int64_t>(
      1, std::max<std::int64_t>(p.batch - 1, 0) * strides[0] + std::max<std::int64_t>(p.heads_kv - 1, 0) * strides[1] + 1);
  const std::int64_t group = p.heads_q / p.heads_kv;
  quantize(q, p.batch, p.heads_q, group, p.seq_q * p.head_dim, strides, factors, out.q, out.q_descale, out.q_real);
  quantize(k, p.batch, p.heads_kv, 1, p.seq_k * p.head_dim, strides, factors, out.k, out.k_descale, out.k_real);
  quantize(v, p.batch, p.heads_kv, 1, p.seq_k * p.head_dim, strides, factors, out.v, out.v_descale, out.v_real);
  return out;
}

std::vector<float> emulate_fp8_attention(const ReferenceProblem& p, const Fp8Values& in, jit::DType out_dtype) {
  const std::int64_t D = p.head_dim, group = p.heads_q / p.heads_kv;
  std::vector<float> out(std::size_t(p.batch * p.heads_q * p.seq_q * D), 0.f);
  std::vector<float> t(std::size_t(p.seq_k), 0.f), acc(std::size_t(D), 0.f);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t hk = h / group;
      const std::size_t factor = std::size_t(b * in.strides[0] + hk * in.strides[1]);
      const float scale_log2 = float(p.scale * 1.4426950408889634) * in.q_descale[factor] * in.k_descale[factor];
      const float* k = &in.k[std::size_t((b * p.heads_kv + hk) * p.seq_k * D)];
      const float* v = &in.v[std::size_t((b * p.heads_kv + hk) * p.seq_k * D)];
      for (std::int64_t i = 0; i < p.seq_q; ++i) {
        const float* q = &in.q[std::size_t(((b * p.heads_q + h) * p.seq_q + i) * D)];
        const std::int64_t keys = visible_keys(p, i);
        float max = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < keys; ++j) {
          float s = 0;
          for (std::int64_t d = 0; d < D; ++d) s += q[d] * k[j * D + d];
          t[std::size_t(j)] = s * scale_log2;
          max = std::max(max, t[std::size_t(j)]);
        }
        float sum = 0;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (std::int64_t j = 0; j < keys; ++j) {
          const float prob = std::exp2(t[std::size_t(j)] - max);
          sum += prob;
          const float rounded = round_to(jit::DType::e4m3, prob);
          for (std::int64_t d = 0; d < D; ++d) acc[std::size_t(d)] += rounded * v[j * D + d];
        }
        float* o = &out[std::size_t(((b * p.heads_q + h) * p.seq_q + i) * D)];
        const float factor_out = keys > 0 ? in.v_descale[factor] / sum : 0.f;
        for (std::int64_t d = 0; d < D; ++d) o[d] = round_to(out_dtype, acc[std::size_t(d)] * factor_out);
      }
    }
  return out;
}

bool fp8_attention_served_here(std::int64_t head_dim) {
  ensure_context();
  const jit::Target& target = jit::detail::current_device().target;
  return target.cc >= 89 && (head_dim != 256 || target.arch == "sm_90a");
}

}  // namespace cujit_test
