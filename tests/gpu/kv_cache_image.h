// The host image of a KV cache for the serving tests: the allocations' values
// in one of the layouts jit/serving.h accepts (a contiguous cache, or page
// pools with a block table whose pages sit in random pool order), with every
// element outside the sequences' keys set to NaN, so that a kernel that lets
// a key past a sequence's length (or a page the sequence does not own) reach
// its output produces NaN there.
#pragma once
#include <cstdint>
#include <vector>

#include "gpu_test_support.h"
#include "jit/tensor.h"
#include "reference_kv_attention.h"

namespace cujit_test {

enum class KvLayout {
  contiguous_bhsd,    ///< [B, Hkv, S_cap, D]
  contiguous_bshd,    ///< [B, S_cap, Hkv, D] (FlashAttention's k_cache)
  paged_head_major,   ///< pools [num_pages, Hkv, page_size, D]
  paged_vllm,         ///< pools [num_pages, page_size, Hkv, D] (vLLM, FlashAttention)
  paged_interleaved,  ///< one pool [num_pages, 2, page_size, Hkv, D]: K then V in each page
};
const char* to_string(KvLayout layout);
bool is_paged(KvLayout layout);

struct KvCacheSpec {
  KvLayout layout = KvLayout::paged_vllm;
  std::int64_t heads_kv = 1, head_dim = 64;
  std::vector<std::int64_t> lengths;  ///< keys held by each sequence (the batch size is lengths.size())
  std::int64_t page_size = 16;        ///< paged layouts only
  /// Keys per sequence the cache has room for (at least every length):
  /// contiguous S_cap; paged: pages_per_seq = ceil(capacity / page_size).
  /// 0: the longest length.
  std::int64_t capacity = 0;
  std::int64_t table_padding = 0;  ///< paged: unused entries at the end of each table row
  std::int64_t spare_pages = 3;    ///< paged: pool pages (NaN) no sequence owns; at least 1
  bool shuffle = true;             ///< paged: sequences' pages in random pool order
};

struct KvCacheImage {
  /// The allocations' contents, in the dtype's values (NaN outside the
  /// sequences). The interleaved pool is one allocation: v_storage is empty
  /// and cache.v points into k_storage.
  std::vector<float> k_storage, v_storage;
  /// Views into the storage (their data pointers are the vectors' buffers,
  /// which moving the image keeps) and the block table.
  KvReferenceCache cache;
  std::int64_t pages_per_seq = 0;       ///< paged: entries of a table row that may be read
  std::int64_t block_table_stride = 0;  ///< paged: as jit::KvCache takes it (0 when rows are packed)
};

/// Builds the image: each sequence's keys and values are normal values
/// (rounded to `dtype`), everything else NaN; unused table entries name
/// spare (NaN) pages.
KvCacheImage build_kv_cache(const KvCacheSpec& spec, jit::DType dtype, TestRng& rng);

/// The device view of an image's host view, for storage uploaded to `base`.
jit::TensorView device_view(const HostView& view, void* base, jit::DType dtype);

}  // namespace cujit_test
