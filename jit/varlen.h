/// @file varlen.h
/// Attention over a ragged (variable-length) batch, in FlashAttention's
/// varlen convention: the sequences' rows packed token-major, one after
/// another, located by prefix sums on the device. For prefill in serving
/// engines, where every request of a step has its own length.
#pragma once
#include <cstdint>

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

}  // namespace jit
