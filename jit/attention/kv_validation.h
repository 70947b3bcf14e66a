// Step 1 of the KV-cache call path (jit/serving.h): the problem a plan is made
// for, each run's arguments checked against it, and the shape that
// attention_with_kvcache reads off its arguments. Plain data, no GPU.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "jit/attention/attention_problem.h"
#include "jit/kernel_family.h"
#include "jit/serving.h"

namespace jit::detail {

// The problem a KV-cache plan is made for: seq_k is max_seq_k, the causal
// mask is bottom-right (causal_offset = max_seq_k - seq_q; each sequence's
// own length shifts it on the device). Throws Error(InvalidArgument) naming
// the field and what to change.
AttnProblem kv_problem_of(const KvAttentionShape& shape, const KvAttentionOptions& options);

// One run's arguments against the plan's problem: q and out [B, Hq, Sq, D],
// the cache (contiguous or paged, as the plan was made), the LSE and the
// workspace (checked only when the plan needs one: workspace_bytes > 0).
// Throws Error(InvalidArgument) naming the argument (q, out, cache.k, cache.v,
// cache.block_table, cache.pages_per_seq, cache.block_table_stride,
// cache.seq_lens, run.lse, run.workspace). Contents on the device (page ids,
// lengths) are not read.
void check_kv_run(const AttnProblem& problem, const TensorView& q, const KvCache& cache, const TensorView& out,
                  const KvRunOptions& run, std::size_t workspace_bytes);

// The descale factors' element strides {batch, KV head} (FP8 caches):
// cache.descale_strides, or a contiguous [B, Hkv].
std::array<std::int64_t, 2> descale_strides_of(const AttnProblem& problem, const KvCache& cache);

// Elements between block-table rows: block_table_stride, or pages_per_seq
// when that is 0.
inline std::int64_t table_stride_of(const KvCache& cache) {
  return cache.block_table_stride != 0 ? cache.block_table_stride : cache.pages_per_seq;
}

// A page pool's page count as the kernels take it, an int32 they clamp page
// ids to: an int32 block table names no page past INT32_MAX, and a count
// past it must not wrap to a bound below 0.
inline int kernel_page_count(const TensorView& pool) {
  return int(std::min<std::int64_t>(pool.shape[0], std::numeric_limits<std::int32_t>::max()));
}

// What attention_with_kvcache plans for: B, Hq, Sq, D and the dtype from q,
// Hkv from cache.k; paged (block_table set): page_size = cache.k.shape[2] and
// max_seq_k = pages_per_seq * page_size; contiguous: page_size 0 and
// max_seq_k = cache.k.shape[2]. Throws Error(InvalidArgument) when
// pages_per_seq is negative or its key count overflows, or a paged pool has
// pages of 0 keys.
KvAttentionShape kv_shape_of(const TensorView& q, const KvCache& cache);

}  // namespace jit::detail
