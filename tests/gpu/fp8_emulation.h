// FP8 attention inputs for the GPU tests, and an fp32 emulation of what the
// FP8 kernels compute: the bar their error is held to. The float64
// reference (reference_attention.h) on the dequantized inputs is the truth;
// the emulation's own distance from it is the error that quantizing P to
// e4m3 alone costs.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "jit/tensor.h"
#include "reference_attention.h"

namespace cujit_test {

/// q, k, v quantized to e4m3 with descale factors over (batch, KV head).
struct Fp8Values {
  std::vector<float> q, k, v;  ///< stored e4m3 values, logical [B, H, S, D]
  /// Factors at [b * strides[0] + h * strides[1]], for B x Hkv.
  std::vector<float> q_descale, k_descale, v_descale;
  std::array<std::int64_t, 2> strides{};
  /// stored x factor: what the reference attends to.
  std::vector<float> q_real, k_real, v_real;
};

/// Quantizes q, k, v (logical order) as a serving stack does: each
/// (batch, KV head) group's amax maps to 448 (a group spans what one factor
/// covers under `strides`: {Hkv, 1} per (b, h), {0, 1} per head, {0, 0} per
/// tensor).
Fp8Values quantize_fp8(const ReferenceProblem& p, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, const std::array<std::int64_t, 2>& strides);

/// The kernels' arithmetic in fp32: scores from the stored values times the
/// q and k factors, exp2 against the row max, the row sum over those fp32
/// probabilities, P rounded to e4m3 for the product with the stored v, times
/// v's factor over the row sum, rounded to `out`. Rows that see no key are
/// zeros. Logical [B, Hq, Sq, D].
std::vector<float> emulate_fp8_attention(const ReferenceProblem& p, const Fp8Values& in, jit::DType out);

/// Whether a kernel on this GPU serves FP8 attention at `head_dim`: from
/// sm_89 on, and D = 256 only on sm_90a (the sm90 family's).
bool fp8_attention_served_here(std::int64_t head_dim);

}  // namespace cujit_test
