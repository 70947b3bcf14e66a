#include "jit/attention/kv_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "jit/attention/fp8_checks.h"
#include "jit/attention/view_checks.h"
#include "jit/error.h"
#include "kernel_src/attention/decode/decode_params.h"

namespace jit::detail {
namespace {

// The limits validate_attention applies: grid dimensions and lengths whose
// index arithmetic stays within int32 with room to spare.
constexpr std::int64_t kMaxGrid = 65535;
constexpr std::int64_t kMaxSeq = std::numeric_limits<std::int32_t>::max() / 2;
constexpr std::int64_t kMaxPageSize = 256;
constexpr int kMaxSplits = cujit::kMaxDecodeSplits;

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// invalid() naming `what` when a [a, b, c, d] tensor has more elements than int64 counts.
void check_element_count(const char* what, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  std::int64_t n = 0;
  if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) || __builtin_mul_overflow(n, d, &n)) {
    invalid(fmt::format("{} would have {} x {} x {} x {} elements, more than a 64-bit count holds: lower "
                        "shape.batch, the heads, the lengths or shape.head_dim",
                        what, a, b, c, d));
  }
}

// q and out are [B, Hq, Sq, D] as the plan was made; names the first dimension that differs.
void expect_query_shape(const char* name, const TensorView& t, const AttnProblem& p) {
  const std::int64_t want[4] = {p.batch, p.heads_q, p.seq_q, p.head_dim};
  const char* what[4] = {"{} has {} sequences, the plan was made for {}",
                         "{} has {} query heads, the plan was made for {}",
                         "{} has {} query rows per sequence, the plan was made for {}",
                         "{} has head dim {}, the plan was made for {}"};
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] != want[i]) {
      invalid(fmt::format(fmt::runtime(what[i]), name, t.shape[i], want[i]) +
              fmt::format(" (dimension {} of its shape {})", i, shape_text(t)));
    }
  }
}

void check_contiguous_cache(const AttnProblem& p, const KvCache& cache) {
  if (cache.block_table != nullptr) {
    invalid("cache.block_table is set but the plan was made for a contiguous cache (page_size 0): pass no block "
            "table, or make the plan with page_size = the pool's keys per page");
  }
  if (cache.k.shape[0] != p.batch) {
    invalid(fmt::format("cache.k has {} sequences, the plan was made for {} (dimension 0 of a contiguous cache)",
                        cache.k.shape[0], p.batch));
  }
  if (cache.k.shape[2] < p.seq_k) {
    invalid(fmt::format("cache.k holds {} keys per sequence (dimension 2), fewer than the plan's max_seq_k {}: "
                        "give a larger cache or plan for fewer keys",
                        cache.k.shape[2], p.seq_k));
  }
}

void check_paged_cache(const AttnProblem& p, const KvCache& cache) {
  if (cache.block_table == nullptr) {
    invalid(fmt::format("cache.block_table is null but the plan was made for a paged cache (pages of {} keys): "
                        "pass the block table, or make the plan with page_size 0 for a contiguous cache",
                        p.page_size));
  }
  if (!aligned(cache.block_table, alignof(std::int32_t))) {
    invalid(fmt::format("cache.block_table must be 4-byte aligned (int32); its address is {}",
                        static_cast<const void*>(cache.block_table)));
  }
  if (cache.k.shape[2] != p.page_size) {
    invalid(fmt::format("cache.k has pages of {} keys, the plan was made for {} (dimension 2 of the pool)",
                        cache.k.shape[2], p.page_size));
  }
  if (cache.k.shape[0] == 0 && p.seq_k > 0 && !p.empty()) {
    invalid(fmt::format("cache.k holds no pages (dimension 0 is 0), but the plan reads up to {} keys per sequence",
                        p.seq_k));
  }
  if (cache.pages_per_seq < 0) {
    invalid(fmt::format("cache.pages_per_seq is {}; it must not be negative", cache.pages_per_seq));
  }
  std::int64_t keys = 0;
  const bool past_int64 = __builtin_mul_overflow(cache.pages_per_seq, std::int64_t(p.page_size), &keys);
  if (!past_int64 && keys < p.seq_k) {
    const std::int64_t pages = (p.seq_k + p.page_size - 1) / p.page_size;
    invalid(fmt::format("the block table is too narrow: cache.pages_per_seq = {} pages of {} keys hold {} keys, "
                        "the plan was made for up to {} (max_seq_k): give at least {} pages per sequence",
                        cache.pages_per_seq, p.page_size, keys, p.seq_k, pages));
  }
  const std::int64_t stride = table_stride_of(cache);  // a negative stride is refused just below
  if (cache.block_table_stride < 0 || stride < cache.pages_per_seq) {
    invalid(fmt::format("cache.block_table_stride is {}; it must be 0 (rows of cache.pages_per_seq entries) or at "
                        "least cache.pages_per_seq ({}), else the table's rows overlap",
                        cache.block_table_stride, cache.pages_per_seq));
  }
  // The last entry read, (B - 1) * stride + pages_per_seq - 1, must be addressable.
  std::int64_t entries = 0;
  std::uintptr_t end = 0;
  if (p.batch > 0 && (__builtin_mul_overflow(p.batch - 1, stride, &entries) ||
                      __builtin_add_overflow(entries, cache.pages_per_seq, &entries) ||
                      __builtin_mul_overflow(std::uintptr_t(entries), sizeof(std::int32_t), &end) ||
                      __builtin_add_overflow(end, reinterpret_cast<std::uintptr_t>(cache.block_table), &end))) {
    invalid(fmt::format("the block table of {} rows of cache.block_table_stride = {} entries (cache.pages_per_seq "
                        "= {}) reaches past the end of the address space from {}",
                        p.batch, stride, cache.pages_per_seq, static_cast<const void*>(cache.block_table)));
  }
}

}  // namespace

std::array<std::int64_t, 2> descale_strides_of(const AttnProblem& problem, const KvCache& cache) {
  return descale_strides_or_default(problem, cache.descale_strides);
}

AttnProblem kv_problem_of(const KvAttentionShape& shape, const KvAttentionOptions& options) {
  const std::pair<const char*, std::int64_t> sizes[] = {{"batch", shape.batch},       {"heads_q", shape.heads_q},
                                                        {"heads_kv", shape.heads_kv}, {"head_dim", shape.head_dim},
                                                        {"seq_q", shape.seq_q},       {"max_seq_k", shape.max_seq_k}};
  for (const auto& [name, value] : sizes) {
    if (value < 0) invalid(fmt::format("shape.{} is {}; sizes must not be negative", name, value));
  }
  if (shape.heads_kv == 0 ? shape.heads_q != 0 : shape.heads_q % shape.heads_kv != 0) {
    invalid(fmt::format("shape.heads_q ({}) must be a multiple of shape.heads_kv ({}) for grouped-query attention",
                        shape.heads_q, shape.heads_kv));
  }
  if (shape.head_dim == 0) invalid("shape.head_dim must not be 0");
  for (const auto& [name, value] : {sizes[0], sizes[1], sizes[2]}) {
    if (value > kMaxGrid) invalid(fmt::format("shape.{} is {}; it must be at most {}", name, value, kMaxGrid));
  }
  for (const auto& [name, value] : {sizes[4], sizes[5]}) {
    if (value > kMaxSeq) invalid(fmt::format("shape.{} is {}; lengths must be at most {}", name, value, kMaxSeq));
  }
  if (shape.page_size < 0 || shape.page_size > kMaxPageSize) {
    invalid(fmt::format("shape.page_size is {}: page size must be 1 to {} keys (0: a contiguous cache)",
                        shape.page_size, kMaxPageSize));
  }
  if (options.num_splits < 0 || options.num_splits > kMaxSplits) {
    invalid(fmt::format("options.num_splits is {}: it must be 0 (the plan chooses) or 1 to {}", options.num_splits,
                        kMaxSplits));
  }
  check_element_count("q", shape.batch, shape.heads_q, shape.seq_q, shape.head_dim);
  check_element_count("the cache (max_seq_k keys per sequence)", shape.batch, shape.heads_kv, shape.max_seq_k,
                shape.head_dim);

  AttnProblem p;
  p.batch = shape.batch;
  p.heads_q = shape.heads_q;
  p.heads_kv = shape.heads_kv;
  p.seq_q = shape.seq_q;
  p.seq_k = shape.max_seq_k;
  p.head_dim = shape.head_dim;
  p.dtype = shape.dtype;
  if (is_fp8(shape.dtype)) {
    invalid(fmt::format("shape.dtype (q's and out's) is {}: q and out are f16 or bf16; an FP8 cache is "
                        "shape.kv_dtype = e4m3 or e5m2",
                        to_string(shape.dtype)));
  }
  const DType kv_dtype = shape.kv_dtype.value_or(shape.dtype);
  if (kv_dtype != shape.dtype && !is_fp8(kv_dtype)) {
    invalid(fmt::format("shape.kv_dtype is {} and shape.dtype {}: the cache is in q's dtype, or FP8 (e4m3 or e5m2)",
                        to_string(kv_dtype), to_string(shape.dtype)));
  }
  p.fp8_kv = is_fp8(kv_dtype);
  if (p.fp8_kv) p.fp8_format = kv_dtype;
  p.causal = options.causal;
  // Bottom-right: the last query row sees every key of the longest sequence.
  p.causal_offset = options.causal ? int(shape.max_seq_k - shape.seq_q) : 0;
  p.scale = options.scale ? *options.scale : float(1.0 / std::sqrt(double(shape.head_dim)));
  if (!(p.scale > 0) || !std::isfinite(p.scale)) {
    invalid(fmt::format("options.scale must be a positive finite number, got {}", p.scale));
  }
  p.page_size = int(shape.page_size);
  p.seq_lens = shape.per_sequence_lengths;
  p.num_splits = options.num_splits;
  p.kv_token_major = shape.token_major;
  if (shape.descale_per_page && !p.fp8_kv) {
    invalid(fmt::format("shape.descale_per_page (cache.descale_per_page in the one-call form) is set but the "
                        "cache is {}: descale factors are for FP8 caches",
                        to_string(kv_dtype)));
  }
  if (shape.descale_per_page && p.page_size == 0) {
    invalid("shape.descale_per_page (cache.descale_per_page in the one-call form) is set but the cache is "
            "contiguous: factors per page are for a paged cache; a contiguous cache's are per sequence");
  }
  p.descale_per_page = shape.descale_per_page;
  return p;
}

void check_kv_run(const AttnProblem& problem, const TensorView& q, const KvCache& cache, const TensorView& out,
                  const KvRunOptions& run, std::size_t workspace_bytes) {
  const std::pair<const char*, const TensorView*> views[] = {
      {"q", &q}, {"out", &out}, {"cache.k", &cache.k}, {"cache.v", &cache.v}};
  for (const auto& [name, view] : views) check_view(name, *view);
  for (const auto& [name, view] : {views[0], views[1]}) {
    if (view->dtype != problem.dtype) {
      invalid(fmt::format("{} has dtype {}, the plan was made for {}: q and out must both be {}", name,
                          to_string(view->dtype), to_string(problem.dtype), to_string(problem.dtype)));
    }
  }
  const DType kv_dtype = problem.kv_dtype();
  for (const auto& [name, view] : {views[2], views[3]}) {
    if (view->dtype != kv_dtype) {
      invalid(fmt::format("{} has dtype {}, the plan was made for a {} cache (shape.kv_dtype){}", name,
                          to_string(view->dtype), to_string(kv_dtype),
                          problem.fp8_kv || !is_fp8(view->dtype)
                              ? ""
                              : fmt::format(": an FP8 cache takes a plan made with shape.kv_dtype = {}",
                                            to_string(view->dtype))));
    }
  }
  if (cache.descale_per_page != problem.descale_per_page) {
    invalid(fmt::format("cache.descale_per_page is {}, the plan was made with shape.descale_per_page = {}: the "
                        "factors must be indexed as the plan's kernel reads them",
                        cache.descale_per_page, problem.descale_per_page));
  }
  check_descales(problem, {{{"cache.k_descale", cache.k_descale}, {"cache.v_descale", cache.v_descale}},
                           cache.descale_strides,
                           "cache.descale_strides",
                           problem.fp8_kv,
                           "the cache",
                           "cache.descale_strides = {0, 0}",
                           problem.descale_per_page ? cache.k.shape[0] : -1});
  expect_query_shape("q", q, problem);
  expect_query_shape("out", out, problem);

  if (cache.k.shape != cache.v.shape) {
    invalid(fmt::format("cache.k and cache.v must have the same shape; got cache.k {} and cache.v {}",
                        shape_text(cache.k), shape_text(cache.v)));
  }
  if (cache.k.shape[1] != problem.heads_kv) {
    invalid(fmt::format("cache.k has {} KV heads, the plan was made for {} (dimension 1)", cache.k.shape[1],
                        problem.heads_kv));
  }
  if (cache.k.shape[3] != problem.head_dim) {
    invalid(fmt::format("cache.k has head dim {}, the plan was made for {} (dimension 3)", cache.k.shape[3],
                        problem.head_dim));
  }
  if (problem.page_size == 0) {
    check_contiguous_cache(problem, cache);
  } else {
    check_paged_cache(problem, cache);
  }

  if (problem.seq_lens && cache.seq_lens == nullptr) {
    invalid("cache.seq_lens is null but the plan was made with per-sequence lengths (per_sequence_lengths = "
            "true): pass the lengths, or make the plan with per_sequence_lengths = false");
  }
  if (!problem.seq_lens && cache.seq_lens != nullptr) {
    invalid("cache.seq_lens is set but the plan was made without per-sequence lengths (every sequence has "
            "max_seq_k keys): make the plan with per_sequence_lengths = true");
  }
  if (!aligned(cache.seq_lens, alignof(std::int32_t))) {
    invalid(fmt::format("cache.seq_lens must be 4-byte aligned (int32); its address is {}",
                        static_cast<const void*>(cache.seq_lens)));
  }

  if (overlaps_itself(out)) {
    invalid(fmt::format("out's strides {} give different elements the same address (a stride of 0 or "
                        "overlapping rows), so writes to it would race: give out a layout of its own",
                        strides_text(out)));
  }
  for (const auto& [name, view] : {views[0], views[2], views[3]}) {
    if (overlaps(out, *view)) {
      invalid(fmt::format("out overlaps {} in memory; attention cannot write in place: give out a separate buffer",
                          name));
    }
  }
  if (!aligned(run.lse, alignof(float))) {
    invalid(fmt::format("run.lse must be 4-byte aligned (float32); its address is {}", static_cast<void*>(run.lse)));
  }
  if (workspace_bytes > 0 && !aligned(run.workspace, 16)) {
    invalid(fmt::format("run.workspace must be 16-byte aligned; its address is {} (nullptr uses the plan's own)",
                        run.workspace));
  }
}

KvAttentionShape kv_shape_of(const TensorView& q, const KvCache& cache) {
  KvAttentionShape shape;
  shape.batch = q.shape[0];
  shape.heads_q = q.shape[1];
  shape.seq_q = q.shape[2];
  shape.head_dim = q.shape[3];
  shape.dtype = q.dtype;
  if (cache.k.dtype != q.dtype) shape.kv_dtype = cache.k.dtype;
  shape.heads_kv = cache.k.shape[1];
  shape.per_sequence_lengths = cache.seq_lens != nullptr;
  shape.token_major = cache.k.strides[1] == cache.k.shape[3] && cache.v.strides[1] == cache.v.shape[3];
  shape.descale_per_page = cache.descale_per_page;
  if (cache.block_table == nullptr) {
    shape.max_seq_k = cache.k.shape[2];
    return shape;
  }
  shape.page_size = cache.k.shape[2];
  if (shape.page_size <= 0) {
    invalid(fmt::format("cache.k has pages of {} keys (dimension 2): page size must be 1 to {} keys (0: a "
                        "contiguous cache, which takes no block table)",
                        shape.page_size, kMaxPageSize));
  }
  if (cache.pages_per_seq < 0) {
    invalid(fmt::format("cache.pages_per_seq is {}; it must not be negative", cache.pages_per_seq));
  }
  if (__builtin_mul_overflow(cache.pages_per_seq, shape.page_size, &shape.max_seq_k)) {
    invalid(fmt::format("cache.pages_per_seq = {} pages of {} keys is more keys than a 64-bit count holds",
                        cache.pages_per_seq, shape.page_size));
  }
  return shape;
}

}  // namespace jit::detail
