// Tests for the serving GPU tests' own machinery (tests/gpu/kv_cache_image and
// reference_kv_attention), on the CPU: the paged gather against hand-computed
// addresses and against a contiguous cache holding the same memory, the cache
// images (each key stored once, NaN everywhere else, unused table entries on
// spare pages) and the per-sequence causal alignment. The GPU tests trust
// these on the first run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "jit/tensor.h"
#include "kv_cache_image.h"
#include "reference_kv_attention.h"

namespace cujit_test {
namespace {

using jit::DType;
using jit::TensorView;

HostView view_over(const std::vector<float>& storage, const TensorView& factory_view, std::int64_t offset = 0) {
  return {storage.data(), storage.size(), offset, factory_view.shape, factory_view.strides};
}

std::vector<float> counting(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

std::vector<float> random_values(std::size_t n, TestRng& rng) { return rng.normal_vector(n, DType::f16); }

KvReferenceProblem problem(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seq_q, std::int64_t head_dim,
                           std::vector<std::int64_t> lengths, bool causal = true) {
  KvReferenceProblem p;
  p.batch = std::int64_t(lengths.size());
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seq_q = seq_q;
  p.head_dim = head_dim;
  p.causal = causal;
  p.scale = 0.3;
  p.seq_lens = std::move(lengths);
  return p;
}

bool same_result(const ReferenceResult& a, const ReferenceResult& b) {
  return a.o == b.o && a.lse == b.lse && a.visible_keys == b.visible_keys;
}

TEST(KvReference, GatherFollowsTheBlockTableInAVllmPool) {
  // Pool [3 pages, page_size 2, Hkv 2, D 8] holding each element's own offset;
  // the sequence's pages are 2 then 0.
  constexpr std::int64_t P = 2, H = 2, D = 8;
  const std::vector<float> pool = counting(3 * P * H * D);
  KvReferenceCache cache;
  cache.k = cache.v = view_over(pool, TensorView::bshd(nullptr, DType::f16, 3, P, H, D));
  cache.block_table = {2, 0, 1};  // stride 3: the last entry is unused
  cache.block_table_stride = 3;
  cache.page_size = P;
  const KvReferenceProblem p = problem(2, H, 1, D, {3});
  const std::vector<float> keys = gather_sequence(p, cache, cache.k, 0);  // [Hkv, 3, D]
  ASSERT_EQ(keys.size(), std::size_t(H * 3 * D));
  const std::int64_t page_of_key[] = {2, 2, 0}, row_of_key[] = {0, 1, 0};
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t d = 0; d < D; ++d) {
        const float want = float(((page_of_key[j] * P + row_of_key[j]) * H + h) * D + d);  // vLLM: page, row, head
        EXPECT_EQ(keys[std::size_t((h * 3 + j) * D + d)], want) << "head " << h << " key " << j << " d " << d;
      }
}

TEST(KvReference, GatherReadsRowsOfAHeadMajorPoolAndAContiguousCache) {
  constexpr std::int64_t P = 4, H = 2, D = 8;
  const std::vector<float> pool = counting(2 * H * P * D);
  KvReferenceCache paged;
  paged.k = paged.v = view_over(pool, TensorView::bhsd(nullptr, DType::f16, 2, H, P, D));
  paged.block_table = {1, 0};
  paged.block_table_stride = 2;
  paged.page_size = P;
  const KvReferenceProblem p = problem(2, H, 1, D, {6});
  const std::vector<float> keys = gather_sequence(p, paged, paged.k, 0);
  // Key 5, head 1: page 0 (the second entry), row 1: ((0 * H + 1) * P + 1) * D.
  EXPECT_EQ(keys[std::size_t((1 * 6 + 5) * D)], float(((0 * H + 1) * P + 1) * D));
  // Key 2, head 0: page 1, row 2.
  EXPECT_EQ(keys[std::size_t((0 * 6 + 2) * D + 3)], float(((1 * H + 0) * P + 2) * D + 3));

  // Contiguous [B = 2, Hkv, S_cap = 5, D]: sequence 1, head 1, key 4.
  const std::vector<float> flat = counting(2 * H * 5 * D);
  KvReferenceCache contiguous;
  contiguous.k = contiguous.v = view_over(flat, TensorView::bhsd(nullptr, DType::f16, 2, H, 5, D));
  const KvReferenceProblem two = problem(2, H, 1, D, {5, 5});
  const std::vector<float> seq1 = gather_sequence(two, contiguous, contiguous.k, 1);
  EXPECT_EQ(seq1[std::size_t((1 * 5 + 4) * D + 7)], float(((1 * H + 1) * 5 + 4) * D + 7));
}

TEST(KvReference, PagesInOrderEqualTheContiguousCacheOverTheSameMemory) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  constexpr std::int64_t P = 8, H = 2, D = 16, pages = 5, keys = pages * P;
  const std::vector<float> k = random_values(std::size_t(keys * H * D), rng);
  const std::vector<float> v = random_values(k.size(), rng);
  const std::vector<float> q = random_values(std::size_t(1 * 4 * 3 * D), rng);
  for (bool causal : {true, false}) {
    const KvReferenceProblem p = problem(4, H, 3, D, {37}, causal);  // not a whole number of pages
    // [pages, P, H, D] in order is [1, keys, H, D]: vLLM pages against FlashAttention's cache.
    KvReferenceCache vllm, bshd;
    vllm.k = view_over(k, TensorView::bshd(nullptr, DType::f16, pages, P, H, D));
    vllm.v = view_over(v, TensorView::bshd(nullptr, DType::f16, pages, P, H, D));
    vllm.block_table = {0, 1, 2, 3, 4};
    vllm.block_table_stride = pages;
    vllm.page_size = P;
    bshd.k = view_over(k, TensorView::bshd(nullptr, DType::f16, 1, keys, H, D));
    bshd.v = view_over(v, TensorView::bshd(nullptr, DType::f16, 1, keys, H, D));
    EXPECT_TRUE(same_result(reference_kv_attention(p, q, vllm), reference_kv_attention(p, q, bshd)));

    // With one KV head, head-major pages in order are [1, 1, keys, D].
    const KvReferenceProblem mqa = problem(4, 1, 3, D, {37}, causal);
    KvReferenceCache head_major, bhsd;
    head_major.k = view_over(k, TensorView::bhsd(nullptr, DType::f16, pages, 1, P, D));
    head_major.v = view_over(v, TensorView::bhsd(nullptr, DType::f16, pages, 1, P, D));
    head_major.block_table = vllm.block_table;
    head_major.block_table_stride = pages;
    head_major.page_size = P;
    bhsd.k = view_over(k, TensorView::bhsd(nullptr, DType::f16, 1, 1, keys, D));
    bhsd.v = view_over(v, TensorView::bhsd(nullptr, DType::f16, 1, 1, keys, D));
    EXPECT_TRUE(same_result(reference_kv_attention(mqa, q, head_major), reference_kv_attention(mqa, q, bhsd)));
  }
}

TEST(KvReference, CausalAlignmentIsBottomRightPerSequence) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  constexpr std::int64_t H = 1, D = 8, cap = 5;
  const std::vector<float> k = random_values(std::size_t(3 * H * cap * D), rng);
  const std::vector<float> v = random_values(k.size(), rng);
  const std::vector<float> q = random_values(std::size_t(3 * H * 2 * D), rng);
  KvReferenceCache cache;
  cache.k = view_over(k, TensorView::bhsd(nullptr, DType::f16, 3, H, cap, D));
  cache.v = view_over(v, TensorView::bhsd(nullptr, DType::f16, 3, H, cap, D));
  const KvReferenceProblem p = problem(H, H, 2, D, {5, 3, 0});
  const ReferenceResult r = reference_kv_attention(p, q, cache);
  // Row i of a sequence of L keys sees i + L - Sq + 1 keys.
  EXPECT_EQ(r.visible_keys, (std::vector<std::int64_t>{4, 5, 2, 3, 0, 0}));
  // The empty sequence: zeros and -inf.
  for (std::int64_t row = 4; row < 6; ++row) {
    EXPECT_EQ(r.lse[std::size_t(row)], -std::numeric_limits<double>::infinity());
    for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(r.o[std::size_t(row * D + d)], 0.0);
  }
  // Sequence 1, row 0 sees keys 0 and 1 of its own cache row.
  double s0 = 0, s1 = 0;
  for (std::int64_t d = 0; d < D; ++d) {
    s0 += double(q[std::size_t(2 * D + d)]) * k[std::size_t((1 * cap + 0) * D + d)];
    s1 += double(q[std::size_t(2 * D + d)]) * k[std::size_t((1 * cap + 1) * D + d)];
  }
  s0 *= p.scale;
  s1 *= p.scale;
  EXPECT_NEAR(r.lse[2], std::log(std::exp(s0) + std::exp(s1)), 1e-12);
  const double w0 = std::exp(s0) / (std::exp(s0) + std::exp(s1));
  EXPECT_NEAR(r.o[std::size_t(2 * D)], w0 * v[std::size_t(1 * cap * D)] + (1 - w0) * v[std::size_t((1 * cap + 1) * D)],
              1e-12);

  // Without the mask, every row of sequence 1 sees its 3 keys.
  const KvReferenceProblem full = problem(H, H, 2, D, {5, 3, 0}, false);
  EXPECT_EQ(reference_kv_attention(full, q, cache).visible_keys, (std::vector<std::int64_t>{5, 5, 3, 3, 0, 0}));
}

// Every key of every sequence is stored exactly once: gathered, no key is
// NaN, and the finite elements of the storage are exactly the keys.
void expect_each_key_stored_once(const KvCacheSpec& spec, const KvCacheImage& image) {
  const KvReferenceProblem p = problem(spec.heads_kv, spec.heads_kv, 1, spec.head_dim, spec.lengths);
  std::int64_t keys = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (const HostView* pool : {&image.cache.k, &image.cache.v}) {
      for (float x : gather_sequence(p, image.cache, *pool, b)) ASSERT_FALSE(std::isnan(x)) << "sequence " << b;
    }
    keys += spec.lengths[std::size_t(b)];
  }
  std::int64_t finite = 0;
  for (const std::vector<float>* storage : {&image.k_storage, &image.v_storage})
    for (float x : *storage) finite += std::isnan(x) ? 0 : 1;
  EXPECT_EQ(finite, 2 * keys * spec.heads_kv * spec.head_dim);
}

TEST(KvCacheImage, PagedImagesHoldEachKeyOnceOnPagesOfTheirOwn) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (KvLayout layout : {KvLayout::paged_vllm, KvLayout::paged_head_major, KvLayout::paged_interleaved})
    for (std::int64_t page_size : {1, 7, 16}) {
      SCOPED_TRACE(fmt::format("{} page size {}", to_string(layout), page_size));
      KvCacheSpec spec;
      spec.layout = layout;
      spec.heads_kv = 2;
      spec.head_dim = 8;
      spec.page_size = page_size;
      spec.lengths = {0, 1, 15, 17, 40};
      spec.capacity = 60;
      spec.table_padding = 2;
      const KvCacheImage image = build_kv_cache(spec, DType::bf16, rng);
      EXPECT_EQ(image.pages_per_seq, (60 + page_size - 1) / page_size);
      EXPECT_EQ(image.block_table_stride, image.pages_per_seq + 2);
      EXPECT_EQ(image.cache.block_table.size(), std::size_t(5 * image.block_table_stride));
      expect_each_key_stored_once(spec, image);

      // No page is shared by two sequences (or twice by one); every other
      // entry names a page that holds only NaN.
      const std::int64_t num_pages = image.cache.k.shape[0];
      std::set<std::int32_t> owned;
      std::int64_t owned_entries = 0;
      for (std::int64_t b = 0; b < 5; ++b)
        for (std::int64_t i = 0; i < image.block_table_stride; ++i) {
          const std::int32_t page = image.cache.block_table[std::size_t(b * image.block_table_stride + i)];
          ASSERT_GE(page, 0);
          ASSERT_LT(page, num_pages);
          if (i * page_size < spec.lengths[std::size_t(b)]) {
            owned.insert(page);
            ++owned_entries;
            continue;
          }
          for (std::int64_t h = 0; h < 2; ++h)
            for (std::int64_t row = 0; row < page_size; ++row)
              for (std::int64_t d = 0; d < 8; ++d) {
                ASSERT_TRUE(std::isnan(image.cache.k.at(page, h, row, d)));
                ASSERT_TRUE(std::isnan(image.cache.v.at(page, h, row, d)));
              }
        }
      EXPECT_EQ(std::int64_t(owned.size()), owned_entries);
      EXPECT_EQ(num_pages, owned_entries + spec.spare_pages);
    }
}

TEST(KvCacheImage, UnshuffledPagesFollowEachOther) {
  TestRng rng;
  KvCacheSpec spec;
  spec.layout = KvLayout::paged_vllm;
  spec.page_size = 4;
  spec.lengths = {8, 5};
  spec.shuffle = false;
  const KvCacheImage image = build_kv_cache(spec, DType::f16, rng);
  ASSERT_EQ(image.block_table_stride, 0);  // packed rows of pages_per_seq = 2
  ASSERT_EQ(image.cache.block_table_stride, 2);
  EXPECT_EQ(image.cache.block_table[0], 0);
  EXPECT_EQ(image.cache.block_table[1], 1);
  EXPECT_EQ(image.cache.block_table[2], 2);
  EXPECT_EQ(image.cache.block_table[3], 3);
}

TEST(KvCacheImage, ContiguousImagesHoldEachKeyOnce) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (KvLayout layout : {KvLayout::contiguous_bhsd, KvLayout::contiguous_bshd}) {
    SCOPED_TRACE(to_string(layout));
    KvCacheSpec spec;
    spec.layout = layout;
    spec.heads_kv = 3;
    spec.head_dim = 8;
    spec.lengths = {0, 9, 30};
    spec.capacity = 32;
    const KvCacheImage image = build_kv_cache(spec, DType::f16, rng);
    EXPECT_FALSE(image.cache.paged());
    EXPECT_EQ(image.cache.k.shape, (Dims4{3, 3, 32, 8}));
    expect_each_key_stored_once(spec, image);
  }
}

TEST(KvCacheImage, InterleavedValuesStartHalfAPageOn) {
  TestRng rng;
  KvCacheSpec spec;
  spec.layout = KvLayout::paged_interleaved;
  spec.heads_kv = 2;
  spec.head_dim = 8;
  spec.page_size = 4;
  spec.lengths = {5};
  const KvCacheImage image = build_kv_cache(spec, DType::f16, rng);
  EXPECT_TRUE(image.v_storage.empty());
  EXPECT_EQ(image.cache.v.data, image.k_storage.data());
  const std::int64_t half_page = 4 * 2 * 8;
  EXPECT_EQ(image.cache.v.offset, half_page);
  EXPECT_EQ(image.cache.k.strides, (Dims4{2 * half_page, 8, 2 * 8, 1}));
  char* base = reinterpret_cast<char*>(std::uintptr_t(0x100000));
  const TensorView v = device_view(image.cache.v, base, DType::f16);
  EXPECT_EQ(v.data, base + half_page * 2);
  EXPECT_EQ(v.strides, image.cache.k.strides);
  EXPECT_EQ(v.shape, image.cache.k.shape);
}

}  // namespace
}  // namespace cujit_test
