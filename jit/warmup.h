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
};

/// Parses "B,H,S,D,dtype,causal" (e.g. "1,16,1024,64,fp16,0"); dtype is
/// fp16|f16|bf16, causal 0|1. Throws Error(InvalidArgument) saying what is wrong.
AttentionShape parse_attention_shape(const std::string& text);

/// Shapes from a JSON manifest: {"shapes": [{"batch":1,"heads":16,"seq":1024,
/// "head_dim":64,"dtype":"fp16","causal":false}, ...]}. Each entry needs
/// "seq" and "head_dim"; "batch" defaults to 1, "heads" to 16, "dtype" to
/// "fp16" (or "bf16"), "causal" and "varlen" (a ragged batch) to false; any
/// other key is refused. Throws
/// Error(InvalidArgument) naming the parse error's position, or the entry (by
/// index from 0) and key that is wrong. An empty "shapes" array is valid.
std::vector<AttentionShape> parse_attention_manifest(const std::string& json_text);

/// The manifest in file `path`: as parse_attention_manifest, with the path in
/// every message; a directory or an unreadable file is Error(InvalidArgument)
/// naming it.
std::vector<AttentionShape> read_attention_manifest(const std::string& path);

/// Every shape the shipped attention families specialize on for `arch` (each
/// head dim a family serves there, both dtypes, causal or not), for --all.
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
/// shapes need into the disk cache, on `threads` threads. Needs no GPU.
/// Checks the cache once before compiling: an untrusted cache directory is
/// Error(Cache), the disk cache turned off (CUJIT_DISK_CACHE=0, where nothing
/// compiled would be kept) Error(InvalidArgument). Afterwards counts in
/// `not_kept` the variants that are no longer in the cache.
WarmupSummary warm_up_attention(const std::vector<std::string>& archs, const std::vector<AttentionShape>& shapes,
                                unsigned threads, const WarmupProgress& progress = {});

/// On the current GPU, tunes each shape (random inputs) so that later
/// processes find the winner in the tuning DB. Adds to `summary`.
void tune_attention_shapes(const std::vector<AttentionShape>& shapes, WarmupSummary& summary);

}  // namespace jit
