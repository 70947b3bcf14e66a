// A float64 CPU reference for attention over a KV cache (jit/serving.h):
// each sequence's keys and values are gathered from the cache's host image
// (a contiguous cache, or page pools read through a block table) exactly as
// the serving API defines them, then run through reference_attention with the
// sequence's own length and bottom-right causal alignment.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu_test_support.h"
#include "reference_attention.h"

namespace cujit_test {

/// A strided 4-D view into host memory: the host twin of a jit::TensorView,
/// with the same shape and strides (elements) and an element offset from the
/// start of the allocation. Reads are bounds-checked (std::logic_error).
struct HostView {
  const float* data = nullptr;  ///< the start of the allocation
  std::size_t size = 0;         ///< elements in the allocation
  std::int64_t offset = 0;      ///< where the view starts
  Dims4 shape{};
  Dims4 strides{};
  float at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const;
};

/// The cache as the kernels see it, on the host.
///  - contiguous (block_table empty): k and v are [B, Hkv, S_cap, D]; key j of
///    sequence b, KV head hk is k[b, hk, j, :].
///  - paged: k and v are pools [num_pages, Hkv, page_size, D]; key j of
///    sequence b is row j % page_size of page block_table[b * stride + j / page_size].
struct KvReferenceCache {
  HostView k, v;
  std::vector<std::int32_t> block_table;
  std::int64_t block_table_stride = 0;  ///< entries between table rows (the resolved value: never 0 when paged)
  std::int64_t page_size = 0;
  bool paged() const { return !block_table.empty(); }
};

struct KvReferenceProblem {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, head_dim = 64;
  bool causal = true;  ///< query row i of a sequence of L keys sees keys j <= i + L - seq_q
  double scale = 0.125;
  std::vector<std::int64_t> seq_lens;  ///< keys of each sequence (its new rows included); size batch
  /// An FP8 cache's descale factors, [B * Hkv]: sequence b's keys (values) of
  /// KV head hk are the cache's times k_descale[b * Hkv + hk]. Empty: 1.
  /// descale_per_page (a paged cache): [num_pages * Hkv], key j of sequence b
  /// and KV head hk times the factor [page * Hkv + hk] of the page it is in.
  std::vector<double> k_descale, v_descale;
  bool descale_per_page = false;
};

/// Sequence b's keys (from cache.k) or values (cache.v): `pool` is one of
/// those two; logical [Hkv, length, D] with length = p.seq_lens[b].
std::vector<float> gather_sequence(const KvReferenceProblem& p, const KvReferenceCache& cache, const HostView& pool,
                                   std::int64_t b);

/// The reference problem of sequence b alone: batch 1, seq_k = L_b, causal
/// offset L_b - seq_q.
ReferenceProblem sequence_problem(const KvReferenceProblem& p, std::int64_t b);

/// q: logical [B, Hq, Sq, D]. O [B, Hq, Sq, D], LSE and visible keys
/// [B, Hq, Sq], sequence by sequence; a row that sees no key gets O = 0 and
/// LSE = -inf.
ReferenceResult reference_kv_attention(const KvReferenceProblem& p, const std::vector<float>& q,
                                       const KvReferenceCache& cache);

}  // namespace cujit_test
