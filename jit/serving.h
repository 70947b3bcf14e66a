/// @file serving.h
/// Attention over a KV cache, for LLM serving: decode (a few new query rows
/// per sequence, Sq = 1..16, speculative verification included) and chunked
/// prefill (a chunk of new rows against a cached prefix), over a contiguous
/// or a paged cache, with a length per sequence. docs/serving.md has a worked
/// example.
///
/// Two ways to call it:
///  - `attention_with_kvcache(q, cache, out, options)`: one call; the plan is
///    made on the first call for a shape and kept.
///  - `plan_kv_attention(shape, options)` once per batch composition, then
///    `plan.run(...)` for every layer of a step: no allocation, no
///    synchronization and no tuning in `run`, so it can be captured in a CUDA
///    graph.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit {

/// The keys and values a batch attends to, read in place.
///
/// Contiguous (block_table == nullptr): k and v are [B, Hkv, S_cap, D] views
/// like attention()'s (any strides, contiguous last dimension).
///
/// Paged (block_table != nullptr): k and v are page pools viewed as
/// [num_pages, Hkv, page_size, D]. vLLM's and FlashAttention's
/// [num_pages, page_size, Hkv, D] is `TensorView::bshd(ptr, dtype, num_pages,
/// page_size, Hkv, D)`; a K/V-interleaved [num_pages, 2, page_size, Hkv, D]
/// pool is two such views, v's data one page-half further and both with a
/// page stride of 2 * page_size * Hkv * D. Row b of the block table lists
/// sequence b's pages in order; pages may sit anywhere in the pool.
///
/// FP8 (k and v in DType::e4m3 or e5m2, q and out in f16 or bf16): each
/// stored value times its (sequence, KV head)'s descale factor is the value
/// attended to, exactly as FlashAttention-3's k_descale and v_descale, [B,
/// Hkv] float32; or, for a paged cache with descale_per_page, its (page, KV
/// head)'s, [num_pages, Hkv]. The scores and the output are scaled; the
/// cache is converted to q's type in registers, exactly (every e4m3 value is
/// an f16 and a bf16 value).
struct KvCache {
  TensorView k, v;
  /// int32 [B, block_table_stride] on the device, or nullptr (contiguous).
  const std::int32_t* block_table = nullptr;
  /// Pages per table row that may be read: ceil(max_seq_k / page_size) at
  /// least.
  std::int64_t pages_per_seq = 0;
  /// Elements between table rows; 0 means pages_per_seq.
  std::int64_t block_table_stride = 0;
  /// int32 [B] on the device: sequence b has seq_lens[b] keys, its new rows
  /// included (FlashAttention's cache_seqlens after appending). nullptr: every
  /// sequence has max_seq_k keys.
  const std::int32_t* seq_lens = nullptr;
  /// FP8 caches only: float32 on the device, positive and finite; the factor
  /// of sequence b and KV head h is at [b * descale_strides[0] + h *
  /// descale_strides[1]]. The default strides are a contiguous [B, Hkv];
  /// {0, 0} is one factor for the whole cache, {0, 1} one per KV head.
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  std::optional<std::array<std::int64_t, 2>> descale_strides;
  /// A paged FP8 cache quantized page by page: the factor of the page at
  /// pool index p and KV head h is at [p * descale_strides[0] + h *
  /// descale_strides[1]] (default strides: a contiguous [num_pages, Hkv]),
  /// for every key in that page. As the plan's shape.descale_per_page says.
  /// With f16 q and out, one sequence's V factors must lie within 2^15 of
  /// one another (the probabilities are scaled by their ratios in f16).
  bool descale_per_page = false;
};

/// What a plan is made for: the host-side facts of one batch composition.
struct KvAttentionShape {
  std::int64_t batch = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  /// q's and out's element type (f16 or bf16).
  DType dtype = DType::f16;
  /// New query rows per sequence: 1 for decode, up to 16 for speculative
  /// verification, more for a prefill chunk.
  std::int64_t seq_q = 1;
  /// The longest sequence's key count (every seq_lens[b] <= max_seq_k).
  std::int64_t max_seq_k = 0;
  /// 0 for a contiguous cache, else the keys per page (1 to 256, any value).
  std::int64_t page_size = 0;
  /// True when the cache gives seq_lens.
  bool per_sequence_lengths = false;
  /// The cache's element type: dtype (the default), or DType::e4m3 for an FP8
  /// cache (sm_89 or newer, head dim 64 or 128).
  std::optional<DType> kv_dtype;
  /// True when a key's KV heads sit side by side in the cache: the
  /// token-major layouts [B, S, Hkv, D] and [pages, page_size, Hkv, D] (vLLM's,
  /// FlashAttention's); false for head-major ones ([B, Hkv, S, D], [pages,
  /// Hkv, page_size, D]). A hint for speed only: either value gives the same
  /// results on either layout. With it, an FP8 cache at head dim 64 with at
  /// most 4 query rows per KV head is read two KV heads at a time.
  bool token_major = true;
  /// A paged FP8 cache whose descale factors are per (page, KV head)
  /// (KvCache::descale_per_page): each key is scaled by its page's.
  bool descale_per_page = false;
};

struct KvAttentionOptions {
  /// Query row i of a sequence with L keys sees keys j <= i + L - Sq (its own
  /// prefix: bottom-right alignment); false: every row sees all L keys.
  bool causal = true;
  std::optional<float> scale;  ///< softmax scale; default 1/sqrt(D); must be > 0
  /// How many parts the key range of each (sequence, KV head) is split into,
  /// each computed by its own CTA and merged (on sm_90 within the CTAs'
  /// cluster when there are two, else in a second pass): 0 lets the
  /// plan choose from the shape and the GPU's SM count; 1 forces no split,
  /// and the tuned config is then one per (rows per KV head, page size)
  /// whatever the batch and lengths, so a sequence's result does not depend
  /// on what else is in the batch (batch-invariant). Any fixed plan is
  /// bitwise deterministic run to run.
  int num_splits = 0;
};

/// Per-run arguments.
struct KvRunOptions {
  Stream stream = nullptr;
  /// float32 contiguous [B, Hq, Sq] on the device, or nullptr: the natural-log
  /// sum of exp(scale * q.k) per query row (-inf for a row that sees no key).
  float* lse = nullptr;
  /// Device memory of at least plan.workspace_bytes(), 16-byte aligned, or
  /// nullptr to use the plan's own (then runs of one plan must not overlap on
  /// different streams).
  void* workspace = nullptr;
};

/// The launches for one batch composition, made once and run many times.
class KvAttentionPlan {
 public:
  KvAttentionPlan();
  ~KvAttentionPlan();
  KvAttentionPlan(KvAttentionPlan&&) noexcept;
  KvAttentionPlan& operator=(KvAttentionPlan&&) noexcept;

  /// q: [B, Hq, Sq, D], out likewise (any strides, contiguous last dimension),
  /// matching the plan's shape; the cache as described above. Enqueued on
  /// run.stream; nothing allocates or synchronizes.
  void run(const TensorView& q, const KvCache& cache, const TensorView& out, const KvRunOptions& run = {}) const;

  const KvAttentionShape& shape() const;
  /// Device memory run needs (0 when nothing is split, or when the splits
  /// merge within their cluster: two on sm_90).
  std::size_t workspace_bytes() const;
  int num_splits() const;
  /// The kernel family and variant the plan launches, and its config.
  std::string family() const;
  std::string variant() const;
  Json config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend KvAttentionPlan plan_kv_attention(const KvAttentionShape&, const KvAttentionOptions&, Stream);
};

/// Chooses (tuning on the first call per shape class, on `stream`), compiles
/// and loads the kernels for `shape`, and allocates the plan's workspace.
/// Must not be called while `stream` is being captured into a graph if the
/// shape class has not been tuned yet: the untuned default config is then
/// used.
KvAttentionPlan plan_kv_attention(const KvAttentionShape& shape, const KvAttentionOptions& options = {},
                                  Stream stream = nullptr);

/// One call: the shape is read from the arguments (max_seq_k from the cache's
/// capacity: S_cap, or pages_per_seq * page_size), planned on the first call
/// and kept per shape. The workspace is the library's, one per stream
/// (run.workspace is for plans and is not read here).
void attention_with_kvcache(const TensorView& q, const KvCache& cache, const TensorView& out,
                            const KvAttentionOptions& options = {}, const KvRunOptions& run = {});

}  // namespace jit
