#include "reference_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

namespace cujit_test {

std::int64_t visible_keys(const ReferenceProblem& p, std::int64_t i) {
  if (!p.causal) return p.seq_k;
  return std::clamp<std::int64_t>(i + p.causal_offset + 1, 0, p.seq_k);
}

namespace {

// Rows [first, last) of the flattened [B, Hq, Sq] row space.
void reference_rows(const ReferenceProblem& p, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, ReferenceResult& out, std::int64_t first, std::int64_t last) {
  const std::int64_t D = p.head_dim;
  const std::int64_t group = p.heads_q / p.heads_kv;
  std::vector<double> scores(std::size_t(std::max<std::int64_t>(p.seq_k, 1)), 0.0);
  std::vector<double> acc(static_cast<std::size_t>(D), 0.0);
  for (std::int64_t row = first; row < last; ++row) {
    const std::int64_t i = row % p.seq_q;
    const std::int64_t h = (row / p.seq_q) % p.heads_q;
    const std::int64_t b = row / (p.seq_q * p.heads_q);
    const std::int64_t hk = h / group;
    const float* qi = q.data() + row * D;
    const float* kh = k.data() + (b * p.heads_kv + hk) * p.seq_k * D;
    const float* vh = v.data() + (b * p.heads_kv + hk) * p.seq_k * D;
    double* oi = out.o.data() + row * D;
    const std::int64_t n = visible_keys(p, i);
    out.visible_keys[std::size_t(row)] = n;
    if (n == 0) {
      std::fill(oi, oi + D, 0.0);
      out.lse[std::size_t(row)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    double max_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      const float* kj = kh + j * D;
      // Four partial sums: independent chains, several times faster than one.
      double part[4] = {0, 0, 0, 0};
      std::int64_t d = 0;
      for (; d + 4 <= D; d += 4)
        for (int u = 0; u < 4; ++u) part[u] += double(qi[d + u]) * double(kj[d + u]);
      for (; d < D; ++d) part[0] += double(qi[d]) * double(kj[d]);
      scores[std::size_t(j)] = p.scale * ((part[0] + part[1]) + (part[2] + part[3]));
      max_score = std::max(max_score, scores[std::size_t(j)]);
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double w = std::exp(scores[std::size_t(j)] - max_score);
      sum += w;
      const float* vj = vh + j * D;
      for (std::int64_t d = 0; d < D; ++d) acc[std::size_t(d)] += w * double(vj[d]);
    }
    for (std::int64_t d = 0; d < D; ++d) oi[d] = acc[std::size_t(d)] / sum;
    out.lse[std::size_t(row)] = max_score + std::log(sum);
  }
}

}  // namespace

ReferenceResult reference_attention(const ReferenceProblem& p, const std::vector<float>& q,
                                    const std::vector<float>& k, const std::vector<float>& v) {
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) {
    throw std::invalid_argument(
        fmt::format("reference_attention: Hq {} is not a multiple of Hkv {}", p.heads_q, p.heads_kv));
  }
  const std::int64_t rows = p.batch * p.heads_q * p.seq_q;
  const std::int64_t D = p.head_dim;
  if (std::int64_t(q.size()) != rows * D || std::int64_t(k.size()) != p.batch * p.heads_kv * p.seq_k * D ||
      k.size() != v.size()) {
    throw std::invalid_argument("reference_attention: input sizes do not match the problem");
  }
  ReferenceResult out;
  out.o.assign(std::size_t(rows * D), 0.0);
  out.lse.assign(std::size_t(rows), 0.0);
  out.visible_keys.assign(std::size_t(rows), 0);
  if (rows == 0) return out;

  // About 2 * Sk * D multiply-adds a row: split large problems over threads.
  const double work = double(rows) * double(std::max<std::int64_t>(p.seq_k, 1)) * double(D);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t threads = work < 4e6 ? 1 : std::min<std::int64_t>({std::int64_t(hw), 64, rows});
  if (threads == 1) {
    reference_rows(p, q, k, v, out, 0, rows);
    return out;
  }
  std::vector<std::thread> pool;
  pool.reserve(std::size_t(threads));
  // Interleaved chunks, so that causal rows (whose cost grows with i) spread evenly.
  const std::int64_t chunk = std::max<std::int64_t>(1, std::min<std::int64_t>(64, rows / (threads * 8)));
  for (std::int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::int64_t first = t * chunk; first < rows; first += threads * chunk) {
        reference_rows(p, q, k, v, out, first, std::min(rows, first + chunk));
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  return out;
}

std::string ErrorReport::describe() const {
  return fmt::format("rel L2 error {:.3e} (||ref|| {:.4g}), max abs error {:.3e} at element {}, {} non-finite "
                     "elements{}",
                     rel_l2, ref_norm, max_abs, max_abs_at, non_finite,
                     non_finite > 0 ? fmt::format(" (first at element {})", first_non_finite_at) : std::string());
}

ErrorReport compare(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) {
    throw std::invalid_argument(fmt::format("compare: {} values against {}", got.size(), ref.size()));
  }
  ErrorReport r;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ref2 += ref[i] * ref[i];
    if (!std::isfinite(got[i])) {
      if (r.non_finite++ == 0) r.first_non_finite_at = std::int64_t(i);
      continue;
    }
    const double diff = double(got[i]) - ref[i];
    diff2 += diff * diff;
    if (std::abs(diff) > r.max_abs || r.max_abs_at < 0) {
      r.max_abs = std::abs(diff);
      r.max_abs_at = std::int64_t(i);
    }
  }
  r.ref_norm = std::sqrt(ref2);
  r.rel_l2 = r.ref_norm > 0 ? std::sqrt(diff2) / r.ref_norm : std::sqrt(diff2);
  if (r.non_finite > 0) r.rel_l2 = std::numeric_limits<double>::infinity();
  return r;
}

}  // namespace cujit_test
