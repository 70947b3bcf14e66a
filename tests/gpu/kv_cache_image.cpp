#include "kv_cache_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace cujit_test {

const char* to_string(KvLayout layout) {
  switch (layout) {
    case KvLayout::contiguous_bhsd: return "contigbhsd";
    case KvLayout::contiguous_bshd: return "contigbshd";
    case KvLayout::paged_head_major: return "pagedheadmajor";
    case KvLayout::paged_vllm: return "pagedvllm";
    case KvLayout::paged_interleaved: return "pagedinterleaved";
  }
  return "?";
}

bool is_paged(KvLayout layout) {
  return layout == KvLayout::paged_head_major || layout == KvLayout::paged_vllm ||
         layout == KvLayout::paged_interleaved;
}

namespace {

// A host view of `storage` with the shape and strides of `factory_view` (a
// TensorView made by the library's own factories, over no memory).
HostView host_view(const std::vector<float>& storage, std::int64_t offset, const jit::TensorView& factory_view) {
  return {storage.data(), storage.size(), offset, factory_view.shape, factory_view.strides};
}

float& element(std::vector<float>& storage, const HostView& view, std::int64_t i0, std::int64_t i1, std::int64_t i2,
               std::int64_t i3) {
  view.at(i0, i1, i2, i3);  // bounds check
  return storage[std::size_t(view.offset + i0 * view.strides[0] + i1 * view.strides[1] + i2 * view.strides[2] +
                             i3 * view.strides[3])];
}

}  // namespace

KvCacheImage build_kv_cache(const KvCacheSpec& spec, jit::DType dtype, TestRng& rng) {
  const std::int64_t B = std::int64_t(spec.lengths.size());
  const std::int64_t H = spec.heads_kv, D = spec.head_dim;
  const std::int64_t longest = B == 0 ? 0 : *std::max_element(spec.lengths.begin(), spec.lengths.end());
  const std::int64_t capacity = spec.capacity > 0 ? spec.capacity : longest;
  if (capacity < longest) throw std::logic_error("build_kv_cache: capacity below the longest length");
  const bool interleaved = spec.layout == KvLayout::paged_interleaved;
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  KvCacheImage image;
  KvReferenceCache& cache = image.cache;

  if (!is_paged(spec.layout)) {
    const std::size_t elements = std::size_t(B * H * capacity * D);
    image.k_storage.assign(elements, kNaN);
    image.v_storage.assign(elements, kNaN);
    const jit::TensorView shape_view = spec.layout == KvLayout::contiguous_bhsd
                                           ? jit::TensorView::bhsd(nullptr, dtype, B, H, capacity, D)
                                           : jit::TensorView::bshd(nullptr, dtype, B, capacity, H, D);
    cache.k = host_view(image.k_storage, 0, shape_view);
    cache.v = host_view(image.v_storage, 0, shape_view);
  } else {
    const std::int64_t P = spec.page_size;
    if (P <= 0) throw std::logic_error("build_kv_cache: a paged layout needs a page size");
    if (spec.spare_pages < 1) throw std::logic_error("build_kv_cache: unused table entries need a spare page");
    image.pages_per_seq = (capacity + P - 1) / P;
    cache.page_size = P;
    cache.block_table_stride = image.pages_per_seq + spec.table_padding;
    image.block_table_stride = spec.table_padding > 0 ? cache.block_table_stride : 0;

    // Pool pages: the sequences' own, then spares; ids in random pool order.
    std::int64_t owned = 0;
    for (std::int64_t length : spec.lengths) owned += (length + P - 1) / P;
    const std::int64_t num_pages = owned + spec.spare_pages;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    if (spec.shuffle) {
      for (std::size_t i = ids.size(); i > 1; --i) {  // Fisher-Yates with the test's generator
        std::swap(ids[i - 1], ids[std::min(i - 1, std::size_t(rng.uniform() * double(i)))]);
      }
    }
    cache.block_table.assign(std::size_t(B * cache.block_table_stride), 0);
    std::size_t next = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t pages = (spec.lengths[std::size_t(b)] + P - 1) / P;
      for (std::int64_t i = 0; i < cache.block_table_stride; ++i) {
        std::size_t id = next;
        if (i < pages) {
          ++next;
        } else {  // an entry past the sequence: a spare page
          id = std::size_t(owned) + std::min(std::size_t(rng.uniform() * double(spec.spare_pages)),
                                             std::size_t(spec.spare_pages - 1));
        }
        cache.block_table[std::size_t(b * cache.block_table_stride + i)] = ids[id];
      }
    }

    const std::int64_t page_elements = P * H * D;
    jit::TensorView shape_view;
    std::int64_t v_offset = 0;
    switch (spec.layout) {
      case KvLayout::paged_head_major: shape_view = jit::TensorView::bhsd(nullptr, dtype, num_pages, H, P, D); break;
      case KvLayout::paged_vllm: shape_view = jit::TensorView::bshd(nullptr, dtype, num_pages, P, H, D); break;
      default:  // interleaved: vLLM pages, K and V halves of one page
        shape_view = jit::TensorView{nullptr, dtype, {num_pages, H, P, D}, {2 * page_elements, D, H * D, 1}};
        v_offset = page_elements;
        break;
    }
    image.k_storage.assign(std::size_t(num_pages * page_elements * (interleaved ? 2 : 1)), kNaN);
    if (!interleaved) image.v_storage.assign(image.k_storage.size(), kNaN);
    cache.k = host_view(image.k_storage, 0, shape_view);
    cache.v = host_view(interleaved ? image.k_storage : image.v_storage, v_offset, shape_view);
  }

  // Each sequence's keys and values, where the reference (and the kernels) read them.
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < spec.lengths[std::size_t(b)]; ++j) {
      std::int64_t slot = b, row = j;
      if (cache.paged()) {
        slot = cache.block_table[std::size_t(b * cache.block_table_stride + j / cache.page_size)];
        row = j % cache.page_size;
      }
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          element(image.k_storage, cache.k, slot, h, row, d) = round_to(dtype, float(rng.normal()));
          element(interleaved ? image.k_storage : image.v_storage, cache.v, slot, h, row, d) =
              round_to(dtype, float(rng.normal()));
        }
    }
  return image;
}

jit::TensorView device_view(const HostView& view, void* base, jit::DType dtype) {
  void* data = static_cast<char*>(base) + view.offset * std::int64_t(jit::element_size(dtype));
  return jit::TensorView{data, dtype, view.shape, view.strides};
}

}  // namespace cujit_test
