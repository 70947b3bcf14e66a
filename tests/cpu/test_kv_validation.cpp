// Tests for jit/attention/kv_validation: the KV-cache plan's problem, each
// run's arguments against it, and the shape read off attention_with_kvcache's
// arguments. The pointers are fake (never dereferenced), so no GPU is needed.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>

#include "jit/attention/kv_validation.h"
#include "tests/support/expect_invalid.h"
#include "jit/error.h"

namespace {

using jit::DType;
using jit::ErrorCode;
using jit::KvAttentionOptions;
using jit::KvAttentionShape;
using jit::KvCache;
using jit::KvRunOptions;
using jit::TensorView;
using jit::detail::AttnProblem;
using jit::detail::check_kv_run;
using jit::detail::kernel_page_count;
using jit::detail::kv_problem_of;
using jit::detail::kv_shape_of;

void* fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }
const std::int32_t* fake_i32(std::uintptr_t address) { return reinterpret_cast<const std::int32_t*>(address); }

// Far-apart, 16-byte-aligned regions (256 MiB apart; every tensor below is smaller).
constexpr std::uintptr_t kQ = 0x10000000, kOut = 0x20000000, kK = 0x30000000, kV = 0x40000000,
                         kTable = 0x50000000, kLens = 0x60000000, kLse = 0x70000000, kWorkspace = 0x80000000;

// B = 4, Hq = 32, Hkv = 8, Sq = 1, D = 128, f16, up to 1000 keys.
constexpr std::int64_t kB = 4, kHq = 32, kHkv = 8, kSq = 1, kD = 128, kMaxSeqK = 1000;
constexpr std::int64_t kPageSize = 16, kPagesPerSeq = 63, kPoolPages = 300;  // 63 * 16 = 1008 >= 1000

KvAttentionShape paged_shape() {
  KvAttentionShape s;
  s.batch = kB;
  s.heads_q = kHq;
  s.heads_kv = kHkv;
  s.head_dim = kD;
  s.seq_q = kSq;
  s.max_seq_k = kMaxSeqK;
  s.page_size = kPageSize;
  s.per_sequence_lengths = true;
  return s;
}

KvAttentionShape contiguous_shape() {
  KvAttentionShape s = paged_shape();
  s.page_size = 0;
  return s;
}

struct RunArgs {
  TensorView q, out;
  KvCache cache;
  KvRunOptions run;
};

RunArgs query_args(DType dtype = DType::f16) {
  RunArgs a;
  a.q = TensorView::bhsd(fake(kQ), dtype, kB, kHq, kSq, kD);
  a.out = TensorView::bhsd(fake(kOut), dtype, kB, kHq, kSq, kD);
  a.run.lse = static_cast<float*>(fake(kLse));
  return a;
}

// A head-major pool [num_pages, Hkv, page_size, D] and its block table.
RunArgs paged_args() {
  RunArgs a = query_args();
  a.cache.k = TensorView::bhsd(fake(kK), DType::f16, kPoolPages, kHkv, kPageSize, kD);
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, kPoolPages, kHkv, kPageSize, kD);
  a.cache.block_table = fake_i32(kTable);
  a.cache.pages_per_seq = kPagesPerSeq;
  a.cache.seq_lens = fake_i32(kLens);
  return a;
}

// [B, Hkv, S_cap, D] with room for 1024 keys.
RunArgs contiguous_args() {
  RunArgs a = query_args();
  a.cache.k = TensorView::bhsd(fake(kK), DType::f16, kB, kHkv, 1024, kD);
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, kB, kHkv, 1024, kD);
  a.cache.seq_lens = fake_i32(kLens);
  return a;
}

void check(const AttnProblem& p, const RunArgs& a, std::size_t workspace_bytes = 0) {
  check_kv_run(p, a.q, a.cache, a.out, a.run, workspace_bytes);
}

using cujit_test::expect_invalid;

void expect_invalid_shape(const KvAttentionShape& s, std::initializer_list<std::string> needles,
                          const KvAttentionOptions& options = {}) {
  expect_invalid([&] { kv_problem_of(s, options); }, needles);
}

void expect_invalid_run(const AttnProblem& p, const RunArgs& a, std::initializer_list<std::string> needles,
                        std::size_t workspace_bytes = 0) {
  expect_invalid([&] { check(p, a, workspace_bytes); }, needles);
}

}  // namespace

// --- kv_problem_of -----------------------------------------------------------

TEST(KvProblemOf, CarriesEveryField) {
  KvAttentionShape s = paged_shape();
  s.seq_q = 4;
  s.dtype = DType::bf16;
  KvAttentionOptions o;
  o.num_splits = 3;
  const AttnProblem p = kv_problem_of(s, o);
  EXPECT_EQ(p.batch, kB);
  EXPECT_EQ(p.heads_q, kHq);
  EXPECT_EQ(p.heads_kv, kHkv);
  EXPECT_EQ(p.seq_q, 4);
  EXPECT_EQ(p.seq_k, kMaxSeqK);
  EXPECT_EQ(p.head_dim, kD);
  EXPECT_EQ(p.dtype, DType::bf16);
  EXPECT_TRUE(p.causal);  // the default: a decode step sees its own prefix
  EXPECT_EQ(p.causal_offset, kMaxSeqK - 4);
  EXPECT_EQ(p.scale, float(1.0 / std::sqrt(double(kD))));
  EXPECT_EQ(p.page_size, kPageSize);
  EXPECT_TRUE(p.seq_lens);
  EXPECT_EQ(p.num_splits, 3);
  EXPECT_TRUE(p.kv_cache());
}

TEST(KvProblemOf, NonCausalHasNoOffsetAndScaleIsKept) {
  KvAttentionOptions o;
  o.causal = false;
  o.scale = 0.5f;
  const AttnProblem p = kv_problem_of(contiguous_shape(), o);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.causal_offset, 0);
  EXPECT_EQ(p.scale, 0.5f);
  EXPECT_EQ(p.page_size, 0);
}

TEST(KvProblemOf, MoreQueryRowsThanKeysGiveANegativeOffset) {
  KvAttentionShape s = contiguous_shape();
  s.seq_q = 16;
  s.max_seq_k = 10;
  EXPECT_EQ(kv_problem_of(s, {}).causal_offset, -6);
}

TEST(KvProblemOf, AcceptsEmptyBatchesAndLimits) {
  KvAttentionShape s = paged_shape();
  s.batch = 0;
  s.max_seq_k = 0;
  EXPECT_TRUE(kv_problem_of(s, {}).empty());
  s = paged_shape();
  s.batch = 65535;
  s.page_size = 256;
  s.max_seq_k = std::numeric_limits<std::int32_t>::max() / 2;
  KvAttentionOptions o;
  o.num_splits = 256;
  EXPECT_NO_THROW(kv_problem_of(s, o));
  s.page_size = 1;
  EXPECT_NO_THROW(kv_problem_of(s, o));
}

TEST(KvProblemOf, RejectsNegativeSizesNamingTheField) {
  for (const char* field : {"batch", "heads_q", "heads_kv", "head_dim", "seq_q", "max_seq_k"}) {
    SCOPED_TRACE(field);
    KvAttentionShape s = paged_shape();
    const std::string name = field;
    (name == "batch" ? s.batch
     : name == "heads_q" ? s.heads_q
     : name == "heads_kv" ? s.heads_kv
     : name == "head_dim" ? s.head_dim
     : name == "seq_q" ? s.seq_q
                       : s.max_seq_k) = -1;
    expect_invalid_shape(s, {"shape." + name, "negative"});
  }
}

TEST(KvProblemOf, RejectsHeadsThatDoNotGroup) {
  KvAttentionShape s = paged_shape();
  s.heads_kv = 5;
  expect_invalid_shape(s, {"shape.heads_q (32)", "multiple of shape.heads_kv (5)"});
  s.heads_kv = 0;
  expect_invalid_shape(s, {"shape.heads_q", "shape.heads_kv (0)"});
}

TEST(KvProblemOf, RejectsHeadDimZero) {
  KvAttentionShape s = paged_shape();
  s.head_dim = 0;
  expect_invalid_shape(s, {"shape.head_dim"});
}

TEST(KvProblemOf, RejectsPageSizesOutsideOneTo256) {
  for (std::int64_t page_size : {-1, 257, 4096}) {
    KvAttentionShape s = paged_shape();
    s.page_size = page_size;
    expect_invalid_shape(s, {"shape.page_size", "page size must be 1 to 256 keys (0: a contiguous cache)"});
  }
}

TEST(KvProblemOf, RejectsSplitCountsOutsideZeroTo256) {
  for (int splits : {-1, 257}) {
    KvAttentionOptions o;
    o.num_splits = splits;
    expect_invalid_shape(paged_shape(), {"options.num_splits", std::to_string(splits)}, o);
  }
}

TEST(KvProblemOf, RejectsGridSizesPast65535) {
  KvAttentionShape s = paged_shape();
  s.batch = 65536;
  expect_invalid_shape(s, {"shape.batch", "65535"});
  s = paged_shape();
  s.heads_q = 65536;
  s.heads_kv = 1;
  expect_invalid_shape(s, {"shape.heads_q", "65535"});
  s = paged_shape();
  s.heads_q = 0;
  s.heads_kv = 65536;
  expect_invalid_shape(s, {"shape.heads_kv", "65535"});
}

TEST(KvProblemOf, RejectsLengthsPastHalfOfInt32) {
  constexpr std::int64_t too_long = std::numeric_limits<std::int32_t>::max() / 2 + 1;
  KvAttentionShape s = paged_shape();
  s.seq_q = too_long;
  expect_invalid_shape(s, {"shape.seq_q"});
  s = paged_shape();
  s.max_seq_k = too_long;
  expect_invalid_shape(s, {"shape.max_seq_k"});
}

TEST(KvProblemOf, RejectsSizesWhoseProductsOverflow) {
  KvAttentionShape s = paged_shape();
  s.head_dim = std::int64_t(1) << 60;  // 4 * 32 * 1 * 2^60 > 2^63
  expect_invalid_shape(s, {"q would have", "64-bit"});
  s = paged_shape();
  s.heads_q = s.heads_kv = 1;
  s.seq_q = 1;
  s.head_dim = std::int64_t(1) << 55;  // q fits (2^57); the cache (4 * 1000 * 2^55) does not
  expect_invalid_shape(s, {"the cache", "64-bit"});
}

TEST(KvProblemOf, RejectsScalesThatAreNotPositiveFinite) {
  for (float scale : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    KvAttentionOptions o;
    o.scale = scale;
    expect_invalid_shape(paged_shape(), {"options.scale"}, o);
  }
}

// --- check_kv_run: accepted arguments ---------------------------------------

TEST(CheckKvRun, AcceptsAHeadMajorPool) { EXPECT_NO_THROW(check(kv_problem_of(paged_shape(), {}), paged_args())); }

TEST(CheckKvRun, AcceptsAVllmLayoutPool) {
  RunArgs a = paged_args();  // [num_pages, page_size, Hkv, D] storage
  a.cache.k = TensorView::bshd(fake(kK), DType::f16, kPoolPages, kPageSize, kHkv, kD);
  a.cache.v = TensorView::bshd(fake(kV), DType::f16, kPoolPages, kPageSize, kHkv, kD);
  EXPECT_NO_THROW(check(kv_problem_of(paged_shape(), {}), a));
}

TEST(CheckKvRun, AcceptsAKvInterleavedPool) {
  // One [num_pages, 2, page_size, Hkv, D] pool: v is half a page further on.
  RunArgs a = paged_args();
  const std::int64_t half_page = kPageSize * kHkv * kD;
  a.cache.k = TensorView{fake(kK), DType::f16, {kPoolPages, kHkv, kPageSize, kD}, {2 * half_page, kD, kHkv * kD, 1}};
  a.cache.v = a.cache.k;
  a.cache.v.data = fake(kK + std::uintptr_t(half_page) * 2);
  EXPECT_NO_THROW(check(kv_problem_of(paged_shape(), {}), a));
}

TEST(CheckKvRun, AcceptsTableStridesAndWiderTables) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.cache.block_table_stride = kPagesPerSeq;
  EXPECT_NO_THROW(check(p, a));
  a.cache.block_table_stride = 128;
  a.cache.pages_per_seq = 100;
  EXPECT_NO_THROW(check(p, a));
}

TEST(CheckKvRun, AcceptsContiguousCachesWithAndWithoutLengths) {
  RunArgs a = contiguous_args();
  EXPECT_NO_THROW(check(kv_problem_of(contiguous_shape(), {}), a));
  KvAttentionShape s = contiguous_shape();
  s.per_sequence_lengths = false;
  a.cache.seq_lens = nullptr;
  EXPECT_NO_THROW(check(kv_problem_of(s, {}), a));
  // FlashAttention's [B, S_cap, Hkv, D] cache, exactly as long as the plan's max_seq_k.
  a.cache.k = TensorView::bshd(fake(kK), DType::f16, kB, kMaxSeqK, kHkv, kD);
  a.cache.v = TensorView::bshd(fake(kV), DType::f16, kB, kMaxSeqK, kHkv, kD);
  EXPECT_NO_THROW(check(kv_problem_of(s, {}), a));
}

TEST(CheckKvRun, AcceptsTokenMajorQueriesAndNoLse) {
  RunArgs a = paged_args();
  a.q = TensorView::bshd(fake(kQ), DType::f16, kB, kSq, kHq, kD);
  a.out = TensorView::bshd(fake(kOut), DType::f16, kB, kSq, kHq, kD);
  a.run.lse = nullptr;
  EXPECT_NO_THROW(check(kv_problem_of(paged_shape(), {}), a));
}

TEST(CheckKvRun, WorkspaceIsCheckedOnlyWhenThePlanNeedsOne) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.run.workspace = nullptr;  // the plan's own
  EXPECT_NO_THROW(check(p, a, 4096));
  a.run.workspace = fake(kWorkspace);
  EXPECT_NO_THROW(check(p, a, 4096));
  a.run.workspace = fake(kWorkspace + 4);
  EXPECT_NO_THROW(check(p, a, 0));  // unused
  expect_invalid_run(p, a, {"run.workspace", "16-byte aligned"}, 4096);
}

// --- check_kv_run: q and out -------------------------------------------------

TEST(CheckKvRun, NamesTheQueryDimensionThatDiffers) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  struct Case {
    std::array<std::int64_t, 4> dims;
    std::string needle;
  };
  const Case cases[] = {{{3, kHq, kSq, kD}, "has 3 sequences, the plan was made for 4"},
                        {{kB, 8, kSq, kD}, "has 8 query heads, the plan was made for 32"},
                        {{kB, kHq, 2, kD}, "has 2 query rows per sequence, the plan was made for 1"},
                        {{kB, kHq, kSq, 64}, "has head dim 64, the plan was made for 128"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    const auto [b, h, s, d] = c.dims;
    RunArgs a = paged_args();
    a.q = TensorView::bhsd(fake(kQ), DType::f16, b, h, s, d);
    expect_invalid_run(p, a, {"q " + c.needle});
    a = paged_args();
    a.out = TensorView::bhsd(fake(kOut), DType::f16, b, h, s, d);
    expect_invalid_run(p, a, {"out " + c.needle});
  }
}

TEST(CheckKvRun, RequiresOneDtypeNamingTheOddOne) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.q.dtype = DType::bf16;
  expect_invalid_run(p, a, {"q has dtype bf16", "made for f16"});
  a = paged_args();
  a.out.dtype = DType::bf16;
  expect_invalid_run(p, a, {"out has dtype bf16"});
  a = paged_args();
  a.cache.v.dtype = DType::bf16;
  expect_invalid_run(p, a, {"cache.v has dtype bf16"});
}

// Each view goes through attention's view checks under its own name.
TEST(CheckKvRun, ChecksEveryViewLikeAttention) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  const std::function<TensorView&(RunArgs&)> pick[] = {[](RunArgs& a) -> TensorView& { return a.q; },
                                                       [](RunArgs& a) -> TensorView& { return a.out; },
                                                       [](RunArgs& a) -> TensorView& { return a.cache.k; },
                                                       [](RunArgs& a) -> TensorView& { return a.cache.v; }};
  const char* names[] = {"q", "out", "cache.k", "cache.v"};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(names[i]);
    const std::string name = names[i];
    RunArgs a = paged_args();
    pick[i](a).data = static_cast<char*>(pick[i](a).data) + 8;
    expect_invalid_run(p, a, {name + " must be 16-byte aligned"});
    a = paged_args();
    pick[i](a).data = nullptr;
    expect_invalid_run(p, a, {name + " is a null pointer"});
    a = paged_args();
    pick[i](a).strides[3] = 2;
    expect_invalid_run(p, a, {name + "'s last dimension must be contiguous"});
    a = paged_args();
    pick[i](a).strides[1] += 4;
    expect_invalid_run(p, a, {name + "'s stride", "multiple of 8 elements"});
    a = paged_args();
    pick[i](a).shape[2] = -1;
    expect_invalid_run(p, a, {name + " has a negative size"});
    a = paged_args();
    pick[i](a).strides[0] = std::numeric_limits<std::int64_t>::max() / 2;
    expect_invalid_run(p, a, {name + "'s shape", "address space"});
  }
}

TEST(CheckKvRun, RejectsAnOutputThatOverlapsItsInputsOrItself) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.out.data = fake(kQ);
  expect_invalid_run(p, a, {"out overlaps q"});
  a = paged_args();
  a.out.data = fake(kK + 4096);  // inside the K pool
  expect_invalid_run(p, a, {"out overlaps cache.k"});
  a = paged_args();
  a.out.data = fake(kV);
  expect_invalid_run(p, a, {"out overlaps cache.v"});
  a = paged_args();
  a.out.strides[0] = 0;  // every sequence written to one place
  expect_invalid_run(p, a, {"out's strides", "same address"});
}

TEST(CheckKvRun, RequiresAnAlignedLse) {
  RunArgs a = paged_args();
  a.run.lse = static_cast<float*>(fake(kLse + 2));
  expect_invalid_run(kv_problem_of(paged_shape(), {}), a, {"run.lse", "4-byte aligned"});
}

// --- check_kv_run: the cache ---------------------------------------------------

TEST(CheckKvRun, RequiresMatchingKAndVHeadsAndHeadDim) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, kPoolPages - 1, kHkv, kPageSize, kD);
  expect_invalid_run(p, a, {"cache.k and cache.v must have the same shape"});
  a = paged_args();
  a.cache.k = a.cache.v = TensorView::bhsd(fake(kK), DType::f16, kPoolPages, 4, kPageSize, kD);
  a.cache.v.data = fake(kV);
  expect_invalid_run(p, a, {"cache.k has 4 KV heads, the plan was made for 8"});
  a = paged_args();
  a.cache.k = a.cache.v = TensorView::bhsd(fake(kK), DType::f16, kPoolPages, kHkv, kPageSize, 64);
  a.cache.v.data = fake(kV);
  expect_invalid_run(p, a, {"cache.k has head dim 64, the plan was made for 128"});
}

TEST(CheckKvRun, ContiguousCacheTakesNoBlockTable) {
  RunArgs a = contiguous_args();
  a.cache.block_table = fake_i32(kTable);
  a.cache.pages_per_seq = kPagesPerSeq;
  expect_invalid_run(kv_problem_of(contiguous_shape(), {}), a, {"cache.block_table is set", "contiguous"});
}

TEST(CheckKvRun, ContiguousCacheNeedsOneRowPerSequenceAndRoomForTheKeys) {
  const AttnProblem p = kv_problem_of(contiguous_shape(), {});
  RunArgs a = contiguous_args();
  a.cache.k = TensorView::bhsd(fake(kK), DType::f16, 3, kHkv, 1024, kD);
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, 3, kHkv, 1024, kD);
  expect_invalid_run(p, a, {"cache.k has 3 sequences, the plan was made for 4"});
  a = contiguous_args();
  a.cache.k = TensorView::bhsd(fake(kK), DType::f16, kB, kHkv, kMaxSeqK - 1, kD);
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, kB, kHkv, kMaxSeqK - 1, kD);
  expect_invalid_run(p, a, {"cache.k holds 999 keys per sequence", "max_seq_k 1000"});
}

TEST(CheckKvRun, PagedCacheNeedsAnAlignedBlockTable) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.cache.block_table = nullptr;
  expect_invalid_run(p, a, {"cache.block_table is null", "paged"});
  a = paged_args();
  a.cache.block_table = fake_i32(kTable + 2);
  expect_invalid_run(p, a, {"cache.block_table must be 4-byte aligned"});
}

TEST(CheckKvRun, PagedCacheNeedsThePlansPageSize) {
  KvAttentionShape s = paged_shape();
  s.page_size = 64;
  RunArgs a = paged_args();
  a.cache.pages_per_seq = 16;  // 16 * 64 >= 1000: only the page size is wrong
  expect_invalid_run(kv_problem_of(s, {}), a, {"cache.k has pages of 16 keys, the plan was made for 64"});
}

TEST(CheckKvRun, PagedCacheNeedsAWideEnoughTable) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.cache.pages_per_seq = kPagesPerSeq - 1;  // 62 * 16 = 992 < 1000
  expect_invalid_run(p, a, {"the block table is too narrow", "cache.pages_per_seq = 62", "at least 63 pages"});
  a.cache.pages_per_seq = -1;
  expect_invalid_run(p, a, {"cache.pages_per_seq is -1"});
}

TEST(CheckKvRun, PagedCacheNeedsTableRowsThatDoNotOverlap) {
  const AttnProblem p = kv_problem_of(paged_shape(), {});
  RunArgs a = paged_args();
  a.cache.block_table_stride = kPagesPerSeq - 1;
  expect_invalid_run(p, a, {"cache.block_table_stride is 62", "at least cache.pages_per_seq (63)"});
  a.cache.block_table_stride = -1;
  expect_invalid_run(p, a, {"cache.block_table_stride is -1"});
  a.cache.block_table_stride = std::numeric_limits<std::int64_t>::max() / 2;
  expect_invalid_run(p, a, {"cache.block_table_stride", "address space"});
}

TEST(CheckKvRun, PagedCacheNeedsPages) {
  RunArgs a = paged_args();
  a.cache.k.shape[0] = a.cache.v.shape[0] = 0;
  expect_invalid_run(kv_problem_of(paged_shape(), {}), a, {"cache.k holds no pages"});
}

TEST(CheckKvRun, SequenceLengthsAsThePlanSays) {
  RunArgs a = paged_args();
  a.cache.seq_lens = nullptr;
  expect_invalid_run(kv_problem_of(paged_shape(), {}), a, {"cache.seq_lens is null", "per_sequence_lengths"});
  KvAttentionShape s = paged_shape();
  s.per_sequence_lengths = false;
  a = paged_args();
  expect_invalid_run(kv_problem_of(s, {}), a, {"cache.seq_lens is set", "per_sequence_lengths = true"});
  a = paged_args();
  a.cache.seq_lens = fake_i32(kLens + 1);
  expect_invalid_run(kv_problem_of(paged_shape(), {}), a, {"cache.seq_lens must be 4-byte aligned"});
}

// --- kv_shape_of -------------------------------------------------------------

// token_major: whether a key's KV heads sit side by side, read off the strides.
TEST(KvShapeOf, TellsTokenMajorCachesFromHeadMajorOnes) {
  RunArgs a = contiguous_args();  // [B, Hkv, S, D]
  EXPECT_FALSE(kv_shape_of(a.q, a.cache).token_major);
  a.cache.k = TensorView::bshd(fake(kK), DType::f16, kB, 1024, kHkv, kD);
  EXPECT_FALSE(kv_shape_of(a.q, a.cache).token_major) << "v is still head-major";
  a.cache.v = TensorView::bshd(fake(kV), DType::f16, kB, 1024, kHkv, kD);
  EXPECT_TRUE(kv_shape_of(a.q, a.cache).token_major);
  EXPECT_NO_THROW(check(kv_problem_of(kv_shape_of(a.q, a.cache), {}), a));
}

TEST(KvShapeOf, ReadsAContiguousCache) {
  RunArgs a = contiguous_args();
  a.cache.seq_lens = nullptr;
  const KvAttentionShape s = kv_shape_of(a.q, a.cache);
  EXPECT_EQ(s.batch, kB);
  EXPECT_EQ(s.heads_q, kHq);
  EXPECT_EQ(s.heads_kv, kHkv);
  EXPECT_EQ(s.seq_q, kSq);
  EXPECT_EQ(s.head_dim, kD);
  EXPECT_EQ(s.dtype, DType::f16);
  EXPECT_EQ(s.page_size, 0);
  EXPECT_EQ(s.max_seq_k, 1024);  // the capacity
  EXPECT_FALSE(s.per_sequence_lengths);
  EXPECT_NO_THROW(check(kv_problem_of(s, {}), a));
}

TEST(KvShapeOf, ReadsAPagedCache) {
  RunArgs a = paged_args();
  a.q = TensorView::bhsd(fake(kQ), DType::bf16, kB, kHq, 4, kD);
  a.out = TensorView::bhsd(fake(kOut), DType::bf16, kB, kHq, 4, kD);
  a.cache.k.dtype = a.cache.v.dtype = DType::bf16;
  const KvAttentionShape s = kv_shape_of(a.q, a.cache);
  EXPECT_EQ(s.dtype, DType::bf16);
  EXPECT_EQ(s.seq_q, 4);
  EXPECT_EQ(s.heads_kv, kHkv);
  EXPECT_EQ(s.page_size, kPageSize);
  EXPECT_EQ(s.max_seq_k, kPagesPerSeq * kPageSize);
  EXPECT_TRUE(s.per_sequence_lengths);
  EXPECT_NO_THROW(check(kv_problem_of(s, {}), a));
}

TEST(KvShapeOf, ReadsAVllmLayoutPool) {
  RunArgs a = paged_args();
  a.cache.k = TensorView::bshd(fake(kK), DType::f16, kPoolPages, 64, kHkv, kD);
  a.cache.v = TensorView::bshd(fake(kV), DType::f16, kPoolPages, 64, kHkv, kD);
  a.cache.pages_per_seq = 20;
  const KvAttentionShape s = kv_shape_of(a.q, a.cache);
  EXPECT_EQ(s.heads_kv, kHkv);
  EXPECT_EQ(s.page_size, 64);
  EXPECT_EQ(s.max_seq_k, 20 * 64);
  EXPECT_NO_THROW(check(kv_problem_of(s, {}), a));
}

TEST(KvShapeOf, RejectsWhatGivesNoKeyCount) {
  RunArgs a = paged_args();
  a.cache.pages_per_seq = -1;
  expect_invalid([&] { kv_shape_of(a.q, a.cache); }, {"cache.pages_per_seq is -1"});
  a.cache.pages_per_seq = std::numeric_limits<std::int64_t>::max() / 4;
  expect_invalid([&] { kv_shape_of(a.q, a.cache); }, {"cache.pages_per_seq", "64-bit"});
  a = paged_args();
  a.cache.k.shape[2] = a.cache.v.shape[2] = 0;
  expect_invalid([&] { kv_shape_of(a.q, a.cache); },
                 {"cache.k has pages of 0 keys", "page size must be 1 to 256 keys"});
}

TEST(KvShapeOf, PoolPagesOverTheLimitReachTheProblemCheck) {
  RunArgs a = paged_args();
  a.cache.k = TensorView::bhsd(fake(kK), DType::f16, 2, kHkv, 512, kD);
  a.cache.v = TensorView::bhsd(fake(kV), DType::f16, 2, kHkv, 512, kD);
  a.cache.pages_per_seq = 2;
  const KvAttentionShape s = kv_shape_of(a.q, a.cache);
  EXPECT_EQ(s.page_size, 512);
  expect_invalid_shape(s, {"page size must be 1 to 256 keys"});
}

// --- FP8 caches ---------------------------------------------------------------

namespace {

constexpr std::uintptr_t kKDescale = 0x90000000, kVDescale = 0xa0000000;

KvAttentionShape fp8_shape() {
  KvAttentionShape s = paged_shape();
  s.kv_dtype = DType::e4m3;
  return s;
}

// The paged pool in e4m3, with [B, Hkv] descale factors.
RunArgs fp8_args() {
  RunArgs a = paged_args();
  a.cache.k.dtype = a.cache.v.dtype = DType::e4m3;
  a.cache.k_descale = static_cast<const float*>(fake(kKDescale));
  a.cache.v_descale = static_cast<const float*>(fake(kVDescale));
  return a;
}

}  // namespace

TEST(KvFp8Cache, PlanAndRunCarryTheCachesType) {
  const AttnProblem p = kv_problem_of(fp8_shape(), {});
  EXPECT_TRUE(p.fp8_kv);
  EXPECT_EQ(p.dtype, DType::f16);
  EXPECT_FALSE(kv_problem_of(paged_shape(), {}).fp8_kv);
  EXPECT_NO_THROW(check(p, fp8_args()));
  RunArgs per_cache = fp8_args();
  per_cache.cache.descale_strides = std::array<std::int64_t, 2>{0, 0};
  EXPECT_NO_THROW(check(p, per_cache));
  EXPECT_EQ(jit::detail::descale_strides_of(p, fp8_args().cache), (std::array<std::int64_t, 2>{kHkv, 1}));
  EXPECT_EQ(jit::detail::descale_strides_of(p, per_cache.cache), (std::array<std::int64_t, 2>{0, 0}));
}

TEST(KvFp8Cache, ShapeOfReadsTheCachesType) {
  RunArgs a = fp8_args();
  const KvAttentionShape s = kv_shape_of(a.q, a.cache);
  ASSERT_TRUE(s.kv_dtype.has_value());
  EXPECT_EQ(*s.kv_dtype, DType::e4m3);
  EXPECT_FALSE(kv_shape_of(paged_args().q, paged_args().cache).kv_dtype.has_value());
}

TEST(KvFp8Cache, RejectsFp8QueriesAndOtherCacheTypes) {
  KvAttentionShape s = fp8_shape();
  s.dtype = DType::e4m3;
  expect_invalid_shape(s, {"shape.dtype", "e4m3", "shape.kv_dtype"});
  s = paged_shape();
  s.kv_dtype = DType::bf16;  // q in f16
  expect_invalid_shape(s, {"shape.kv_dtype is bf16", "shape.dtype f16"});
}

TEST(KvFp8Cache, AnE5m2CacheIsItsOwnFormat) {
  KvAttentionShape s = fp8_shape();
  s.kv_dtype = DType::e5m2;
  const AttnProblem p = kv_problem_of(s, {});
  EXPECT_TRUE(p.fp8_kv);
  EXPECT_EQ(p.fp8_format, DType::e5m2);
  EXPECT_EQ(p.kv_dtype(), DType::e5m2);
  EXPECT_FALSE(p == kv_problem_of(fp8_shape(), {}));  // an e4m3 plan is another plan
  RunArgs e5m2 = fp8_args();
  e5m2.cache.k.dtype = e5m2.cache.v.dtype = DType::e5m2;
  EXPECT_NO_THROW(check(p, e5m2));
  expect_invalid_run(p, fp8_args(), {"cache.k has dtype e4m3", "e5m2 cache"});
  expect_invalid_run(kv_problem_of(fp8_shape(), {}), e5m2, {"cache.k has dtype e5m2", "e4m3 cache"});
  expect_invalid_run(kv_problem_of(paged_shape(), {}), e5m2, {"cache.k has dtype e5m2", "shape.kv_dtype = e5m2"});
  s.dtype = DType::e5m2;
  expect_invalid_shape(s, {"shape.dtype", "e5m2", "f16 or bf16"});
}

TEST(KvFp8Cache, RunNeedsTheCacheInThePlansType) {
  RunArgs sixteen_bit = paged_args();
  expect_invalid_run(kv_problem_of(fp8_shape(), {}), sixteen_bit, {"cache.k has dtype f16", "e4m3"});
  RunArgs fp8 = fp8_args();
  expect_invalid_run(kv_problem_of(paged_shape(), {}), fp8, {"cache.k has dtype e4m3", "shape.kv_dtype = e4m3"});
  RunArgs fp8_q = fp8_args();
  fp8_q.q.dtype = DType::e4m3;
  expect_invalid_run(kv_problem_of(fp8_shape(), {}), fp8_q, {"q has dtype e4m3", "f16"});
}

TEST(KvFp8Cache, RunNeedsBothDescalesOnlyForAnFp8Cache) {
  const AttnProblem p = kv_problem_of(fp8_shape(), {});
  RunArgs a = fp8_args();
  a.cache.k_descale = nullptr;
  expect_invalid_run(p, a, {"cache.k_descale is null", "[B, Hkv]"});
  a = fp8_args();
  a.cache.v_descale = nullptr;
  expect_invalid_run(p, a, {"cache.v_descale is null"});
  a = fp8_args();
  a.cache.v_descale = static_cast<const float*>(fake(kVDescale + 2));
  expect_invalid_run(p, a, {"cache.v_descale must be 4-byte aligned"});
  a = fp8_args();
  a.cache.descale_strides = std::array<std::int64_t, 2>{-1, 1};
  expect_invalid_run(p, a, {"cache.descale_strides", "negative"});
  a = fp8_args();
  a.cache.descale_strides = std::array<std::int64_t, 2>{std::numeric_limits<std::int64_t>::max() / 2, 1};
  expect_invalid_run(p, a, {"cache.descale_strides", "64-bit"});

  RunArgs sixteen_bit = paged_args();
  sixteen_bit.cache.k_descale = static_cast<const float*>(fake(kKDescale));
  expect_invalid_run(kv_problem_of(paged_shape(), {}), sixteen_bit, {"cache.k_descale is set", "FP8"});
  sixteen_bit = paged_args();
  sixteen_bit.cache.descale_strides = std::array<std::int64_t, 2>{0, 0};
  expect_invalid_run(kv_problem_of(paged_shape(), {}), sixteen_bit, {"cache.descale_strides is set"});
}

// --- FP8 caches with descale factors per page ---------------------------------

TEST(KvFp8Cache, FactorsPerPageAreAPagedFp8PlansAndItsRunsAlike) {
  KvAttentionShape s = fp8_shape();
  s.descale_per_page = true;
  const AttnProblem p = kv_problem_of(s, {});
  EXPECT_TRUE(p.descale_per_page);
  EXPECT_FALSE(p == kv_problem_of(fp8_shape(), {}));  // another plan, another kernel
  RunArgs a = fp8_args();
  a.cache.descale_per_page = true;
  EXPECT_NO_THROW(check(p, a));
  // The default strides are a contiguous [num_pages, Hkv].
  EXPECT_EQ(jit::detail::descale_strides_of(p, a.cache), (std::array<std::int64_t, 2>{kHkv, 1}));
  EXPECT_TRUE(kv_shape_of(a.q, a.cache).descale_per_page);
  // A run's cache must say what the plan said, either way.
  expect_invalid_run(p, fp8_args(), {"cache.descale_per_page is false", "shape.descale_per_page = true"});
  expect_invalid_run(kv_problem_of(fp8_shape(), {}), a,
                     {"cache.descale_per_page is true", "shape.descale_per_page = false"});
  // Strides are checked over the pool's pages, not the batch's sequences.
  RunArgs per_sequence = fp8_args();
  per_sequence.cache.descale_strides =
      std::array<std::int64_t, 2>{std::numeric_limits<std::int64_t>::max() / (2 * kPoolPages), 1};
  EXPECT_NO_THROW(check(kv_problem_of(fp8_shape(), {}), per_sequence)) << "over " << kB << " sequences it fits";
  a.cache.descale_strides = std::array<std::int64_t, 2>{std::numeric_limits<std::int64_t>::max() / (2 * kPoolPages), 1};
  expect_invalid_run(p, a, {"cache.descale_strides", std::to_string(kPoolPages) + " pages", "64-bit"});
  a = fp8_args();
  a.cache.descale_per_page = true;
  a.cache.k_descale = nullptr;
  expect_invalid_run(p, a, {"cache.k_descale is null", "[num_pages, Hkv]"});
}

TEST(KvFp8Cache, FactorsPerPageNeedAPagedFp8Cache) {
  KvAttentionShape s = paged_shape();  // 16-bit
  s.descale_per_page = true;
  expect_invalid_shape(s, {"descale_per_page", "f16", "FP8 caches"});
  s = fp8_shape();
  s.page_size = 0;
  s.descale_per_page = true;
  expect_invalid_shape(s, {"descale_per_page", "contiguous", "per sequence"});
}

// The kernels clamp page ids to the pool's count as an int32: a pool of more
// than INT32_MAX pages (aliased pages; no block table names one past it) must
// give the largest int32, not a count that wrapped below zero.
TEST(KernelPageCount, IsThePoolsPagesUpToTheLargestInt32) {
  EXPECT_EQ(kernel_page_count(TensorView::bhsd(fake(kK), DType::f16, kPoolPages, kHkv, kPageSize, kD)), kPoolPages);
  constexpr std::int64_t kWrapping = std::int64_t(3) << 30;  // int(kWrapping) < 0
  const TensorView aliased = TensorView::bhsd(fake(kK), DType::bf16, kWrapping, 1, 1, 64);
  EXPECT_EQ(kernel_page_count(aliased), std::numeric_limits<std::int32_t>::max());
}
