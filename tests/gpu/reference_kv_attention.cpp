#include "reference_kv_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace cujit_test {

float HostView::at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
  const std::int64_t index = offset + i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3];
  if (i0 < 0 || i0 >= shape[0] || i1 < 0 || i1 >= shape[1] || i2 < 0 || i2 >= shape[2] || i3 < 0 || i3 >= shape[3] ||
      index < 0 || std::size_t(index) >= size) {
    throw std::logic_error(fmt::format("HostView: ({}, {}, {}, {}) lies outside shape [{}, {}, {}, {}] or the "
                                       "allocation of {} elements",
                                       i0, i1, i2, i3, shape[0], shape[1], shape[2], shape[3], size));
  }
  return data[index];
}

std::vector<float> gather_sequence(const KvReferenceProblem& p, const KvReferenceCache& cache, const HostView& pool,
                                   std::int64_t b) {
  const std::int64_t length = p.seq_lens.at(std::size_t(b));
  const std::int64_t D = p.head_dim;
  if (pool.shape[1] != p.heads_kv || pool.shape[3] != D) {
    throw std::logic_error("gather_sequence: the cache's heads or head dim differ from the problem's");
  }
  std::vector<float> out(std::size_t(p.heads_kv * length * D));
  for (std::int64_t j = 0; j < length; ++j) {
    std::int64_t slot = b, row = j;  // contiguous: k[b, hk, j, :]
    if (cache.paged()) {
      if (cache.page_size <= 0) throw std::logic_error("gather_sequence: a paged cache needs a page size");
      const std::size_t entry = std::size_t(b * cache.block_table_stride + j / cache.page_size);
      slot = cache.block_table.at(entry);
      row = j % cache.page_size;
    }
    for (std::int64_t hk = 0; hk < p.heads_kv; ++hk)
      for (std::int64_t d = 0; d < D; ++d) out[std::size_t((hk * length + j) * D + d)] = pool.at(slot, hk, row, d);
  }
  return out;
}

ReferenceProblem sequence_problem(const KvReferenceProblem& p, std::int64_t b) {
  ReferenceProblem one;
  one.batch = 1;
  one.heads_q = p.heads_q;
  one.heads_kv = p.heads_kv;
  one.seq_q = p.seq_q;
  one.seq_k = p.seq_lens.at(std::size_t(b));
  one.head_dim = p.head_dim;
  one.causal = p.causal;
  one.causal_offset = one.seq_k - p.seq_q;  // bottom-right within the sequence
  one.scale = p.scale;
  return one;
}

namespace {

// Sequence b's [Hkv, L, D] keys or values times their factors (none when
// `factors` is empty): their heads' or, per page, their pages' and heads'.
// Rounded to float: 2^-24 relative, far below any output tolerance.
std::vector<float> descaled(const KvReferenceProblem& p, const KvReferenceCache& cache,
                            const std::vector<double>& factors, std::vector<float> x, std::int64_t b) {
  if (factors.empty()) return x;
  if (p.descale_per_page && !cache.paged()) {
    throw std::invalid_argument("reference_kv_attention: descale factors per page for a contiguous cache");
  }
  const std::int64_t outer = p.descale_per_page ? cache.k.shape[0] : p.batch;
  if (std::int64_t(factors.size()) != outer * p.heads_kv) {
    throw std::invalid_argument(fmt::format("reference_kv_attention: {} descale factors for {} x {} heads",
                                            factors.size(), outer, p.heads_kv));
  }
  const std::size_t per_head = x.size() / std::size_t(std::max<std::int64_t>(p.heads_kv, 1));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::int64_t hk = std::int64_t(i / per_head);
    std::int64_t row = b;
    if (p.descale_per_page) {
      const std::int64_t key = std::int64_t(i % per_head) / p.head_dim;
      row = cache.block_table[std::size_t(b * cache.block_table_stride + key / cache.page_size)];
    }
    x[i] = float(double(x[i]) * factors[std::size_t(row * p.heads_kv + hk)]);
  }
  return x;
}

}  // namespace

ReferenceResult reference_kv_attention(const KvReferenceProblem& p, const std::vector<float>& q,
                                       const KvReferenceCache& cache) {
  if (std::int64_t(p.seq_lens.size()) != p.batch) {
    throw std::invalid_argument(fmt::format("reference_kv_attention: {} lengths for {} sequences", p.seq_lens.size(),
                                            p.batch));
  }
  const std::int64_t rows = p.heads_q * p.seq_q;  // per sequence
  const std::int64_t D = p.head_dim;
  if (std::int64_t(q.size()) != p.batch * rows * D) {
    throw std::invalid_argument("reference_kv_attention: q's size does not match the problem");
  }
  ReferenceResult out;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::vector<float> q_b(q.begin() + b * rows * D, q.begin() + (b + 1) * rows * D);
    const ReferenceResult one =
        reference_attention(sequence_problem(p, b), q_b,
                            descaled(p, cache, p.k_descale, gather_sequence(p, cache, cache.k, b), b),
                            descaled(p, cache, p.v_descale, gather_sequence(p, cache, cache.v, b), b));
    out.o.insert(out.o.end(), one.o.begin(), one.o.end());
    out.lse.insert(out.lse.end(), one.lse.begin(), one.lse.end());
    out.visible_keys.insert(out.visible_keys.end(), one.visible_keys.begin(), one.visible_keys.end());
  }
  return out;
}

}  // namespace cujit_test
