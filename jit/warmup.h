/// @file warmup.h
/// Filling the cache ahead of time: compile (no GPU needed) and, on a GPU,
/// tune the attention variants a workload will use.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit {

/// One attention problem class: the spec fields plus sizes (sizes matter
/// only for tuning).
struct AttentionShape {
  std::int64_t batch = 1, heads = 16, seq = 1024, head_dim = 64;
  DType dtype = DType::f16;
  bool causal = false;
  /// A ragged batch (jit/varlen.h) of `batch` sequences of `seq` rows.
  bool varlen = false;
  /// Attention over a KV cache (jit/serving.h: plan_kv_attention,
  /// attention_with_kvcache), with a length per sequence: `seq` is then
  /// max_seq_k, `heads` the query heads, and `causal` the plan's
  /// KvAttentionOptions::causal (whose default is true). Not with `varlen`.
  /// The fields below are read only when it is set.
  bool kv_cache = false;
  /// New query rows per sequence: 1 for decode, up to 16 for speculative
  /// rows, more for a chunked prefill.
  std::int64_t new_rows = 1;
  std::int64_t heads_kv = 0;   ///< 0 means `heads`
  std::int64_t page_size = 0;  ///< 0: a contiguous cache; else 1 to 256 keys per page
  /// The cache in FP8 (with descale factors), q and out in `dtype`.
  bool fp8_kv = false;
  /// fp8_kv's format: DType::e4m3 or DType::e5m2.
  DType fp8_format = DType::e4m3;
  /// The cache is head-major (KvAttentionShape::token_major = false): warms
  /// the variants a plan for such caches runs.
  bool kv_head_major = false;
  /// A paged FP8 cache with descale factors per (page, KV head)
  /// (KvAttentionShape::descale_per_page).
  bool kv_descale_per_page = false;
  /// Not a KV-cache shape: q, k and v in DType::e4m3 (FP8 attention), out
  /// in `dtype`; with `varlen`, a ragged FP8 batch.
  bool fp8_qkv = false;
};

/// Parses "B,H,S,D,dtype,causal" (e.g. "1,16,1024,64,fp16,0"); dtype is
/// fp16|f16|bf16, causal 0|1. Throws Error(InvalidArgument) saying what is wrong.
AttentionShape parse_attention_shape(const std::string& text);

/// Shapes from a JSON manifest: {"shapes": [{"batch":1,"heads":16,"seq":1024,
/// "head_dim":64,"dtype":"fp16","causal":false}, ...]}. Each entry needs
/// "seq" and "head_dim"; "batch" defaults to 1, "heads" to 16, "dtype" to
/// "fp16" (or "bf16"), "causal" and "varlen" (a ragged batch) to false.
/// "kv_cache": true makes it a KV-cache shape (not with "varlen"), which may
/// also give "new_rows" (default 1), "heads_kv" (default "heads"),
/// "page_size" (default 0: contiguous), "kv_dtype" ("fp8" or "e4m3" for
/// an FP8 cache, else "dtype"'s) and "head_major" (default false: the
/// token-major caches of vLLM and FlashAttention) and "descale_per_page" (default false; true: a paged
/// FP8 cache's factors per page), and whose "causal" defaults to true, as
/// KvAttentionOptions's does; those keys without "kv_cache": true, and any
/// other key, are refused. A dense or ragged shape may give "qkv_dtype":
/// "fp8" (or "e4m3"): q, k and v in e4m3, out in "dtype". Throws Error(InvalidArgument) naming the parse
/// error's position, or the entry (by index from 0) and key that is wrong (a
/// KV-cache shape plan_kv_attention would refuse included). An empty
/// "shapes" array is valid.
std::vector<AttentionShape> parse_attention_manifest(const std::string& json_text);

/// The manifest in file `path`: as parse_attention_manifest, with the path in
/// every message; a directory or an unreadable file is Error(InvalidArgument)
/// naming it.
std::vector<AttentionShape> read_attention_manifest(const std::string& path);

/// Every shape the shipped attention families specialize on for `arch` (each
/// head dim a family serves there, both dtypes, causal or not, dense and
/// ragged, with q, k and v in the output's dtype or, where FP8 attention is
/// served (sm_89 or newer), in e4m3), for --all. KV-cache shapes are not
/// listed: the decode family's full set over caches is thousands of variants.
std::vector<AttentionShape> all_attention_specializations(const std::string& arch);

struct WarmupSummary {
  int compiled = 0;  ///< variants NVRTC compiled now
  int cached = 0;    ///< variants already in the disk cache
  int failed = 0;
  /// Variants compiled or found that were no longer in the disk cache when
  /// the warm-up ended: evicted because CUJIT_CACHE_MAX_BYTES is smaller than
  /// the set. Nonzero means a later process compiles them again.
  int not_kept = 0;
  int tuned = 0;     ///< shapes tuned on the GPU
  double seconds = 0;
  std::vector<std::string> errors;
};

using WarmupProgress = std::function<void(const CompileReport& report, std::size_t done, std::size_t total)>;

/// Compiles, for each arch, every unpruned config of every variant these
/// shapes need into the disk cache, on `threads` threads. Needs no GPU. A
/// shape no family serves on an arch (a head dim, an FP8 cache before sm_89)
/// is Error(Unsupported) saying why, a KV-cache shape plan_kv_attention would
/// refuse Error(InvalidArgument), both before anything compiles.
/// Checks the cache once before compiling: an untrusted cache directory is
/// Error(Cache), the disk cache turned off (CUJIT_DISK_CACHE=0, where nothing
/// compiled would be kept) Error(InvalidArgument). Afterwards counts in
/// `not_kept` the variants that are no longer in the cache.
WarmupSummary warm_up_attention(const std::vector<std::string>& archs, const std::vector<AttentionShape>& shapes,
                                unsigned threads, const WarmupProgress& progress = {});

/// On the current GPU, tunes each shape (random inputs) so that later
/// processes find the winner in the tuning DB; a KV-cache shape by making its
/// plan (plan_kv_attention tunes on its first call per shape class). Adds to
/// `summary`.
void tune_attention_shapes(const std::vector<AttentionShape>& shapes, WarmupSummary& summary);

}  // namespace jit
