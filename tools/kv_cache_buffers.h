// Device memory for one decode shape: q, out and per-sequence lengths, and
// its keys and values as a contiguous cache or as a shuffled page pool, in
// the [.., S, Hkv, D] layout serving engines keep (FlashAttention's and
// vLLM's), so the paged and contiguous rows read the same rows of bytes.
#pragma once
#include <cstdint>

#include "jit/serving.h"
#include "jit/tensor.h"
#include "tools/serving_shapes.h"

namespace serving_bench {

/// Uniform random values in [-1, 1): a few MiB made on the host from `seed`,
/// repeated over the buffer on the device.
void fill_random(jit::DeviceBuffer& buffer, jit::DType dtype, std::uint64_t seed);

/// q and out [B, Hq, 1, D], seq_lens [B] = Sk on the device, and for an FP8
/// cache descale factors [B, Hkv] (all 1).
struct DecodeInputs {
  jit::DeviceBuffer q_buffer, out_buffer, seq_lens, descale;
  jit::TensorView q, out;
};
DecodeInputs decode_inputs(const DecodeShape& shape);

/// Where a sequence's pages sit in the pool: anywhere, in any order (a
/// serving engine's pool after many allocations and frees), or one after
/// another (what a paged kernel costs with the pool's layout taken out).
enum class PageOrder { shuffled, in_order };

/// How the caches are laid out: token-major rows [.., S, Hkv, D] (the
/// serving engines'), or head-major [.., Hkv, S, D] (each head's keys one
/// after another: what a kernel costs with the heads' interleaving taken out).
/// descale_per_page: an FP8 pool's descale factors per (page, KV head)
/// (jit::KvCache::descale_per_page; contiguous caches keep theirs per
/// sequence).
struct CacheLayout {
  PageOrder order = PageOrder::shuffled;
  bool head_major = false;
  bool descale_per_page = false;
};

/// K and V [B, Sk, Hkv, D] (head-major: [B, Hkv, Sk, D]), each sequence full
/// (seq_lens = Sk).
struct ContiguousCache {
  jit::DeviceBuffer k, v;
  jit::KvCache cache;
};
ContiguousCache contiguous_cache(const DecodeShape& shape, const DecodeInputs& inputs, const CacheLayout& layout = {});

/// K and V pools [B * Sk / page_size, page_size, Hkv, D] (head-major: [..,
/// Hkv, page_size, D]) and a block table that places each sequence's pages
/// in the pool as `layout.order` says.
struct PagedCache {
  jit::DeviceBuffer k, v, block_table, page_descale;
  jit::KvCache cache;
};
PagedCache paged_cache(const DecodeShape& shape, std::int64_t page_size, const DecodeInputs& inputs,
                       const CacheLayout& layout = {});

/// The plan's shape: Sq = 1, every length given, `page_size` 0 for contiguous,
/// the caches laid out as `layout` says.
jit::KvAttentionShape kv_attention_shape(const DecodeShape& shape, std::int64_t page_size,
                                         const CacheLayout& layout = {});

}  // namespace serving_bench
