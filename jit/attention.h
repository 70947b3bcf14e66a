/// @file attention.h
/// Fused (flash) attention forward, compiled for the GPU at hand.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit {

/// Where the causal diagonal sits when Sq != Sk.
enum class CausalAlign {
  TopLeft,      ///< query i sees keys j <= i (PyTorch's is_causal)
  BottomRight,  ///< query i sees keys j <= i + Sk - Sq (FlashAttention)
};

/// FP8 inputs' descale factors (q, k and v in DType::e4m3): float32 on the
/// device, positive and finite, as FlashAttention-3's q_descale, k_descale
/// and v_descale. Each stored value times its factor is the value attended
/// to. The factors of batch b (of a ragged batch: sequence b) and KV head h
/// are at [b * strides[0] + h * strides[1]] (a query head uses its KV
/// head's); the default strides are a contiguous [B, Hkv], {0, 0} is one
/// factor per tensor, {0, 1} one per KV head.
struct Fp8Descale {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  std::optional<std::array<std::int64_t, 2>> strides;
};

struct AttentionOptions {
  bool causal = false;
  CausalAlign align = CausalAlign::TopLeft;
  std::optional<float> scale;  ///< softmax scale; default 1/sqrt(D); must be > 0
  Stream stream = nullptr;     ///< work is enqueued here; nothing synchronizes
  /// When set, receives the natural-log sum of exp(scale * q.k) per query row:
  /// float32, contiguous [B, Hq, Sq], on the device.
  float* lse = nullptr;
  /// Required when q, k and v are e4m3; must be empty otherwise.
  Fp8Descale descale;
};

/// o = softmax(scale * q k^T [+ causal mask]) v, written into `out`.
/// q: [B, Hq, Sq, D]; k, v: [B, Hkv, Sk, D]; out: [B, Hq, Sq, D]; any strides
/// with a contiguous last dimension. Hq must be a multiple of Hkv (GQA/MQA).
/// q, k, v and out are all f16 or all bf16; or q, k and v are e4m3 (FP8,
/// sm_89 and newer, head dim 64 or 128, or 256 on sm_90a) with options.descale set and out f16
/// or bf16: then the scores are computed from the e4m3 values exactly, and
/// the probabilities are rounded to e4m3 for the product with v (as
/// FlashAttention-3's FP8 forward does).
/// A query row that sees no key (causal, bottom-right, Sq > Sk) gets zeros and
/// an LSE of -inf. The first call for a new shape class compiles and tunes;
/// later calls and processes reuse the result. With CUJIT_AUTOTUNE=background
/// the first call runs at once on the default config while the tuning runs
/// on a worker thread, and later calls take the winner once it is ready (so
/// the config, and the low bits of the result, can change between calls).
void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
               const AttentionOptions& options = {});

/// As above, with the output allocated by cujit (contiguous [B, Hq, Sq, D],
/// in q's dtype; bf16 for e4m3 inputs).
DeviceTensor attention(const TensorView& q, const TensorView& k, const TensorView& v,
                       const AttentionOptions& options = {});

/// The attention kernel family registered for the current device, and the
/// config attention() would use for this problem (tuning it if needed).
struct AttentionPlan {
  std::string family;
  std::string variant;
  Json config;
};
AttentionPlan plan_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                             const AttentionOptions& options = {});

/// CUJIT_AUTOTUNE=background: blocks until every tuning started so far has
/// finished; the next call of each of their shapes then runs the winner.
/// Returns at once when none was started (and in the other modes).
void wait_for_background_tuning();

}  // namespace jit
