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
// cached keys), 16-bit q and cache, the cache contiguous or in pages of any
// size. The registry gives these to it ahead of the decode family (which
// serves them when CUJIT_FAMILY=decode forces it).
bool sm90_serves_kv_chunk(const AttnProblem& problem, const Target& target);
// Pages the sm90 family loads by TMA, a box of a page's rows (a power of two
// of at least this many keys; attn_fwd_sm90.cu, PAGE > 0). Smaller pages, or
// pages of other sizes, it gathers a row at a time (PAGE = kGatheredRows):
// over pages of 16 a block of 128 keys is 16 boxes a K or V load, and the
// TMA unit, not the tensor cores, set the pace (docs/perf-log.md, "sm90 over
// a KV cache v2").
inline constexpr std::int64_t kSm90TmaPageRows = 64;
bool sm90_loads_pages_by_tma(std::int64_t page_size);
FamilyRegistration sm90_registration();

}  // namespace jit::detail
