// Step 1 of the call path: checked attention arguments as plain data, the
// specialization they select, and the kernel parameter struct built from
// them. No GPU needed.
#pragma once
#include <bit>
#include <cstdint>
#include <functional>
#include <tuple>

#include "jit/attention.h"
#include "jit/varlen.h"
#include "kernel_src/attention/attn_params.h"

namespace jit::detail {

struct AttnProblem {
  std::int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  DType dtype = DType::f16;
  bool causal = false;
  // Key j visible to query i iff j <= i + causal_offset (+ L - seq_k for a
  // sequence of L keys when seq_lens is set: bottom-right per sequence).
  int causal_offset = 0;
  float scale = 0;
  // KV-cache problems (jit/serving.h): seq_k is the longest sequence's key
  // count; page_size > 0 when K and V are page pools read through a block
  // table; seq_lens when each sequence's length is on the device;
  // num_splits as asked (0: the family chooses).
  int page_size = 0;
  bool seq_lens = false;
  int num_splits = 0;
  // An FP8 cache: K and V in fp8_format with descale factors, q and out in dtype.
  bool fp8_kv = false;
  // FP8 attention: q, K and V in e4m3 with descale factors, out in dtype.
  bool fp8_qkv = false;
  // The FP8 data's format: e4m3, or e5m2 (caches only).
  DType fp8_format = DType::e4m3;
  // Ragged batches (jit/varlen.h): batch sequences packed into total_q query
  // rows and total_k keys; seq_q and seq_k are the longest sequence's, the
  // causal diagonal is each sequence's (bottom right when align_bottom_right,
  // and causal_offset is 0).
  bool varlen = false;
  std::int64_t total_q = 0, total_k = 0;
  bool align_bottom_right = false;
  // A cache's KV heads side by side in a key's row (KvAttentionShape::token_major).
  bool kv_token_major = true;
  // A paged FP8 cache's descale factors per (page, KV head), not per
  // (sequence, KV head) (KvAttentionShape::descale_per_page).
  bool descale_per_page = false;
  // The element types of q and of K and V (out's is dtype).
  DType q_dtype() const { return fp8_qkv ? fp8_format : dtype; }
  DType kv_dtype() const { return fp8_kv || fp8_qkv ? fp8_format : dtype; }
  // K and V bytes of one key, over every KV head.
  std::int64_t kv_bytes_per_key() const {
    return 2 * heads_kv * head_dim * std::int64_t(element_size(kv_dtype()));
  }
  // Query heads per KV head (GQA's group; 1 for MHA, heads_q for MQA).
  std::int64_t group() const { return heads_q / (heads_kv > 0 ? heads_kv : 1); }
  bool empty() const { return batch == 0 || heads_q == 0 || seq_q == 0 || (varlen && total_q == 0); }
  bool kv_cache() const { return page_size > 0 || seq_lens; }
  // Every field, once: equality and the hash below both read it, so a field
  // added here is part of every key built from a problem.
  auto fields() const {
    return std::tie(batch, heads_q, heads_kv, seq_q, seq_k, head_dim, dtype, causal, causal_offset, scale, page_size,
                    seq_lens, num_splits, fp8_kv, fp8_qkv, fp8_format, varlen, total_q, total_k,
                    align_bottom_right, kv_token_major, descale_per_page);
  }
  bool operator==(const AttnProblem& other) const { return fields() == other.fields(); }
};

// A hash over fields(): what the hot path's shape cache keys on.
std::size_t hash_value(const AttnProblem& problem);

// What an attention kernel is specialized on (its template arguments beyond
// the config); the families' Spec, JSON only in keys, records and logs.
struct AttnSpec {
  DType dtype = DType::f16;
  int head_dim = 0;
  bool causal = false;
  // The decode family's too: K/V through a block table, and the packed rows
  // per CTA (0 for the other families, and then absent from the JSON).
  bool paged = false;
  int block_m = 0;
  // The decode family's FP8 cache ("kv": "e4m3" or "e5m2" in the JSON when
  // set: fp8_format).
  bool fp8_kv = false;
  // FP8 attention: q, k and v in e4m3, out in dtype ("qkv": "e4m3").
  bool fp8_qkv = false;
  DType fp8_format = DType::e4m3;
  // A ragged batch (absent from the JSON when false).
  bool varlen = false;
  // Decode over an FP8 cache at head dim 64: two KV heads a CTA
  // (kernel_src/attention/decode/attn_decode.cu, PAIRED).
  bool paired_kv_heads = false;
  // Decode over a paged FP8 cache whose descale factors are per (page, KV
  // head) ("kv_scale": "page"; attn_decode.cu, PAGE_DESCALE).
  bool page_descale = false;
  // Decode over a paged cache: the page size the variant was compiled for
  // ("page" in the JSON when set; attn_decode.cu, PAGE), 0 where the kernel
  // reads it from its parameters.
  int page_size = 0;
  // The sm90 family over a KV cache: a chunk of query rows against each
  // sequence's keys ("cache": true; attn_fwd_sm90.cu, KV_CACHE), paged when
  // `paged` (its page size then `page_size`, compiled in, for pages loaded
  // by TMA; 0 where the kernel gathers rows from pages of any size).
  bool kv_cache = false;
  auto fields() const {
    return std::tie(dtype, head_dim, causal, paged, block_m, fp8_kv, fp8_qkv, fp8_format, varlen, paired_kv_heads,
                    page_descale, page_size, kv_cache);
  }
  bool operator==(const AttnSpec& other) const { return fields() == other.fields(); }
};
AttnSpec spec_of(const AttnProblem& problem);
// The page sizes kernels are compiled for (AttnSpec::page_size): powers of
// two of at least 8 keys. The decode family's load passes step through such
// a page; the sm90 family's TMA boxes of a page's rows each start a
// 1,024-byte swizzle atom (8 rows of 128 bytes; it loads pages of 64 keys or
// more that way). Other sizes take the variants that read the page size
// from their parameters.
constexpr bool compiles_page_size(std::int64_t page_size) {
  return page_size >= 8 && std::has_single_bit(std::uint64_t(page_size));
}
// {"dtype": "f16" | "bf16", "d": head dim, "causal": bool} (and "paged",
// "bm", "kv", "qkv", "varlen", "kv_heads", "kv_scale", "page", "cache" when set): the form tune keys, cubin keys and tuning
// records hold.
void to_json(Json& j, const AttnSpec& spec);
void from_json(const Json& j, AttnSpec& spec);
// The kernels' name for a dtype: "f16", "bf16", "e4m3" or "e5m2" (cujit::f16, ...).
const char* kernel_dtype_name(DType dtype);

// Throws Error(InvalidArgument) naming the argument and what to change, or
// Error(Unsupported) for a valid problem no family handles.
AttnProblem validate_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options);
// A ragged batch's prefix sums: present (unless the batch has no sequences)
// and int32-aligned, else Error(InvalidArgument) naming them.
void check_prefix_sum_pointers(const VarlenBatch& batch);
// The same for a ragged batch (jit/varlen.h): q, k, v and out have batch 1,
// and `batch` is checked too (naming batch.cu_seqlens_q and so on).
AttnProblem validate_attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const VarlenBatch& batch,
                                      const AttentionOptions& options);

cujit::AttnParams make_attn_params(const AttnProblem& problem, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out, float* lse);

// Problem-size fields of the tune key: sizes rounded up to powers of two
// (at least 64), so that one tuning serves a class of shapes.
Json attention_bucket(const AttnProblem& problem);

}  // namespace jit::detail
