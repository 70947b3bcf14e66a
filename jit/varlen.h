/// @file varlen.h
/// Attention over a ragged (variable-length) batch, in FlashAttention's
/// varlen convention: the sequences' rows packed token-major, one after
/// another, located by prefix sums on the device. For prefill in serving
/// engines, where every request of a step has its own length.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "jit/attention.h"
#include "jit/tensor.h"

namespace jit {

/// Where B sequences sit in packed q / k / v rows: sequence b has query rows
/// [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and keys [cu_seqlens_k[b],
/// cu_seqlens_k[b + 1]). A sequence may have 0 rows or 0 keys.
struct VarlenBatch {
  /// int32 [batch + 1] on the device, non-decreasing from 0.
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  std::int64_t batch = 0;
  /// The longest sequence's query rows and keys (the host's copy: the
  /// device's prefix sums are not read back).
  std::int64_t max_seqlen_q = 0;
  std::int64_t max_seqlen_k = 0;
};

/// o = softmax(scale * q k^T [+ causal mask]) v for each sequence of a ragged
/// batch, written into `out`.
/// q: [1, Hq, total_q, D] (packed [total_q, Hq, D] storage is
/// `TensorView::bshd(data, dtype, 1, total_q, Hq, D)`), k and v [1, Hkv,
/// total_k, D], out like q; any strides with a contiguous last dimension.
/// options.causal masks per sequence, with options.align's diagonal (bottom
/// right: a sequence's last query row sees its last key). options.lse, when
/// set, is float32 contiguous [Hq, total_q]. Rows of q and out outside every
/// sequence are not read or written; rows of k and v past cu_seqlens_k[batch]
/// are not used, but must hold finite values on sm_90a (their products with
/// a zero probability must be zero).
///
/// FP8: q, k and v in e4m3 (out f16 or bf16) with options.descale, as
/// jit::attention takes them, per sequence: a contiguous [batch, Hkv] by
/// default (each request quantized with factors of its own).
///
/// Under CUJIT_CHECK=1 the prefix sums are checked on the device first (and
/// the stream synchronized): a jit::Error names the first wrong entry.
/// Without it a wrong entry never makes a kernel read or write outside the
/// tensors, but its sequence's rows are wrong.
void attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                      const VarlenBatch& batch, const AttentionOptions& options = {});

/// Per-run arguments of a ragged plan (as AttentionOptions has them).
struct VarlenRunOptions {
  Stream stream = nullptr;
  /// float32 contiguous [Hq, total_q] on the device, or nullptr.
  float* lse = nullptr;
  /// Required when q, k and v are e4m3: per sequence, as attention_varlen.
  Fp8Descale descale;
  /// The memory a prepare() listed the tiles into (its `workspace`), or
  /// nullptr for the plan's own.
  void* workspace = nullptr;
};

/// A ragged batch's launches, made once per batch composition and run for
/// every layer of a model step. attention_varlen lists the batch's tiles
/// (longest work first) from the prefix sums on every call; a plan lists
/// them once per step, in prepare(), and each run() launches the attention
/// kernel alone over that list. Neither allocates, synchronizes or tunes,
/// so both can be captured in a CUDA graph.
///
///     auto plan = jit::plan_attention_varlen(q, k, v, out, batch, options);  // tunes on a new shape class
///     plan.prepare(batch, stream);           // once the step's cu_seqlens are on the device
///     for (auto& layer : layers) plan.run(layer.q, layer.k, layer.v, layer.out, {stream});
///
/// A run uses the list of the last prepare() into the same workspace before
/// it in stream order: runs and prepares of one plan and workspace go on one
/// stream (or are ordered by events), and prepare() again whenever the
/// prefix sums change. A list made from other prefix sums gives that batch's
/// result, never an access outside the tensors (the list is clamped to them,
/// as attention_varlen's is).
class VarlenAttentionPlan {
 public:
  VarlenAttentionPlan();
  ~VarlenAttentionPlan();
  VarlenAttentionPlan(VarlenAttentionPlan&&) noexcept;
  VarlenAttentionPlan& operator=(VarlenAttentionPlan&&) noexcept;

  /// Lists the tiles of `batch` (one small kernel on `stream` that reads its
  /// prefix sums) into `workspace`: device memory of at least
  /// workspace_bytes(), 16-byte aligned, that the runs over this list then
  /// name too, or nullptr for the plan's own. batch.batch and the maxima
  /// must be the plan's; the pointers may differ. Under CUJIT_CHECK=1 the
  /// prefix sums are checked first, as attention_varlen does. A workspace of
  /// the caller's lets one plan keep several lists (one per stream, or per
  /// batch in flight) in memory from the caller's allocator.
  void prepare(const VarlenBatch& batch, Stream stream = nullptr, void* workspace = nullptr) const;

  /// o = attention over the listed batch for one layer: q, k, v and out with
  /// the plan's shapes and element types (any data and strides, contiguous
  /// last dimension); the causal mask, its alignment and the scale are the
  /// plan's.
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
           const VarlenRunOptions& run = {}) const;

  /// Device memory the plan holds for its tile list, and that a caller's
  /// workspace must have.
  std::size_t workspace_bytes() const;
  /// The kernel family and variant each run launches, and its config (as
  /// jit::plan_attention reports them); empty for a batch with nothing to
  /// compute, where nothing is launched.
  std::string family() const;
  std::string variant() const;
  Json config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend VarlenAttentionPlan plan_attention_varlen(const TensorView&, const TensorView&, const TensorView&,
                                                   const TensorView&, const VarlenBatch&, const AttentionOptions&);
};

/// Validates as attention_varlen does, chooses the config (tuning on the first
/// call of a shape class, on options.stream, with these inputs; out is not
/// written), loads the kernels and allocates the tile list's memory.
/// options.causal, align and scale are fixed for the plan; its lse and
/// descale are what tuning runs with (a run takes its own). Must not be
/// called while options.stream is being captured if the shape class has not
/// been tuned: the untuned default config is then used.
VarlenAttentionPlan plan_attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                                          const TensorView& out, const VarlenBatch& batch,
                                          const AttentionOptions& options = {});

}  // namespace jit
