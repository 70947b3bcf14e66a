// A float64 CPU reference for attention, and the error measures the GPU
// tests compare against it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cujit_test {

struct ReferenceProblem {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  bool causal = false;
  /// Causal: key j is visible to query i iff j <= i + causal_offset
  /// (0: top-left; seq_k - seq_q: bottom-right).
  std::int64_t causal_offset = 0;
  double scale = 0.125;
};

struct ReferenceResult {
  std::vector<double> o;    ///< logical [B, Hq, Sq, D]
  std::vector<double> lse;  ///< [B, Hq, Sq]: ln sum_j exp(scale q.k_j); -inf for a row that sees no key
  std::vector<std::int64_t> visible_keys;  ///< [B, Hq, Sq]: keys each row sees
};

/// Keys query row i sees.
std::int64_t visible_keys(const ReferenceProblem& p, std::int64_t i);

/// q: [B, Hq, Sq, D], k and v: [B, Hkv, Sk, D], all in logical order. Query
/// head h reads kv head h / (Hq / Hkv). A row that sees no key gets O = 0 and
/// LSE = -inf. Runs on all hardware threads for large problems.
ReferenceResult reference_attention(const ReferenceProblem& p, const std::vector<float>& q,
                                    const std::vector<float>& k, const std::vector<float>& v);

/// How far `got` is from `ref` (same length).
struct ErrorReport {
  double rel_l2 = 0;       ///< ||got - ref|| / ||ref|| (||got - ref|| when ref is all zero)
  double max_abs = 0;      ///< max |got - ref| over finite elements
  std::int64_t max_abs_at = -1;
  double ref_norm = 0;
  std::int64_t non_finite = 0;  ///< NaN or inf elements of got (e.g. never written: poison)
  std::int64_t first_non_finite_at = -1;
  std::string describe() const;
};
ErrorReport compare(const std::vector<float>& got, const std::vector<double>& ref);

}  // namespace cujit_test
