// The checks every FP8 path shares (an e4m3 or e5m2 KV cache, FP8 attention):
// the descale factors (present exactly when the data is FP8, float32-aligned,
// strides over (batch, KV head) within a 64-bit offset), and the targets and
// head dims FP8 kernels exist for.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "jit/attention/attention_problem.h"
#include "jit/kernel_family.h"

namespace jit::detail {

struct DescaleArgs {
  // Each factor's argument name ("cache.k_descale") and pointer.
  std::initializer_list<std::pair<const char*, const float*>> factors;
  const std::optional<std::array<std::int64_t, 2>>& strides;
  const char* strides_name;  // "cache.descale_strides"
  bool fp8;                  // the data they scale is FP8
  const char* data_name;     // what they scale, for messages: "the cache"
  const char* layout_hint;   // how to give one factor for all, for the "is null" message
  // Factors per (page, KV head) over a pool of this many pages; -1: per
  // (sequence, KV head), over p.batch sequences.
  std::int64_t pages;
};

// Throws Error(InvalidArgument) naming the argument: a factor set for 16-bit
// data, one missing for FP8 data (unless the problem is empty), one not
// 4-byte aligned, strides set for 16-bit data, negative, or reaching past a
// 64-bit offset over p.batch (or args.pages) x p.heads_kv.
void check_descales(const AttnProblem& p, const DescaleArgs& args);

// The strides in effect: the given ones, or a contiguous [B, Hkv].
inline std::array<std::int64_t, 2> descale_strides_or_default(
    const AttnProblem& p, const std::optional<std::array<std::int64_t, 2>>& strides) {
  return strides.value_or(std::array<std::int64_t, 2>{p.heads_kv, 1});
}

// Whether FP8 data in `format` needs sm_89 or newer: e4m3 converts (and
// multiplies) with sm_89's instructions; an e5m2 byte is the upper byte of
// an f16, placed by a byte permute on any target.
inline bool fp8_needs_sm89(DType format) { return format == DType::e4m3; }

// An FP8 problem (fp8_kv or fp8_qkv) where no kernel serves it: before sm_89
// (no e4m3 conversions or FP8 mma; an e5m2 cache needs neither) or at a head
// dim other than 64 and 128 (and, for FP8 attention on sm_90a, 256).
// Error(Unsupported) saying what to use.
void check_fp8_target(const AttnProblem& problem, const Target& target);

}  // namespace jit::detail
