// The Hopper attention family (TMA, wgmma, warp specialization, persistent
// CTAs: sm_90a): kernel_src/attention/sm90/.
#pragma once
#include <cstdint>

#include "jit/attention/family_registry.h"

namespace jit::detail {

const AttentionFamily& sm90_attention_family();

// Query rows a chunk over a KV cache needs before the sm90 family serves it
// rather than the decode family (whose tiles pack a GQA group's few rows).
inline constexpr std::int64_t kSm90KvChunkRows = 128;
// Whether the sm90 family serves a problem over a KV cache on `target`: a
// chunk of at least kSm90KvChunkRows query rows (a prefill chunk against
// cached keys), 16-bit q and cache, the cache contiguous or in pages of a
// power of two of at least 8 keys (attn_fwd_sm90.cu, PAGE). The registry
// gives these to it ahead of the decode family (which serves them when
// CUJIT_FAMILY=decode forces it).
bool sm90_serves_kv_chunk(const AttnProblem& problem, const Target& target);
FamilyRegistration sm90_registration();

}  // namespace jit::detail
