// The split-KV decode family (mma.sync, cp.async: sm_80 and newer):
// kernel_src/attention/decode/. It serves KV-cache problems (jit/serving.h)
// and dense problems with few query rows per KV head.
#pragma once
#include "jit/attention/family_registry.h"

namespace jit::detail {

const AttentionFamily& decode_attention_family();
FamilyRegistration decode_registration();

// The most packed rows (query heads per KV head times new rows) for which a
// dense jit::attention call goes to the decode family.
constexpr std::int64_t kDecodeMaxDenseRows = 64;

// Head dim 256 over an FP8 cache, or on a GPU older than sm_90, fits the
// registers only in a block of at most this many packed rows (the keys as
// the MMA's rows: attention/decode/keys_as_rows.cuh).
constexpr std::int64_t kDecodeNarrowHeadDim256Rows = 8;

// Packed rows: query heads per KV head times new rows.
std::int64_t decode_packed_rows(const AttnProblem& problem);

// Whether the decode family serves problem's head dim on target: 64 and 128
// everywhere; 256 on sm_90 over a 16-bit cache, and elsewhere (FP8 caches,
// sm_80, sm_89) with at most kDecodeNarrowHeadDim256Rows packed rows.
bool decode_serves_head_dim(const AttnProblem& problem, const Target& target);

}  // namespace jit::detail
