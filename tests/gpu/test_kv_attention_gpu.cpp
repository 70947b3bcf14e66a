// jit/serving.h on the GPU (cujit_gpu_kv_tests): attention over contiguous
// and paged KV caches (decode, speculative rows, chunked prefill; every cache
// layout the API takes; shuffled pages; per-sequence lengths) against the
// float64 reference, LSE included, sequence by sequence; then the plan's
// contract: forced and chosen splits, bitwise identical runs, replay from a
// CUDA graph, attention_with_kvcache, a caller's workspace; FP8 (e4m3)
// caches with their descale factors over the same grid. Keys past a
// sequence's length and pages no sequence owns hold NaN (kv_cache_image.h).
// Every test skips, with the reason, where there is no usable GPU. main() is
// gpu_test_main.cpp (a fresh cache directory; CUJIT_AUTOTUNE=off unless set).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/driver.h"
#include "jit/attention/kv_validation.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "jit/serving.h"
#include "jit/tensor.h"
#include "kernel_src/attention/decode/decode_params.h"
#include "kv_cache_image.h"
#include "reference_kv_attention.h"

namespace cujit_test {
namespace {

using jit::DType;

// One call of the serving API and the cache it reads.
struct KvCase {
  DType dtype = DType::f16;
  std::int64_t heads_q = 8, seq_q = 1;
  KvCacheSpec cache;     ///< heads_kv, head_dim, the lengths (one per sequence), layout, page size
  bool seq_lens = true;  ///< pass the lengths; false: every sequence has max_seq_k keys
  std::int64_t max_seq_k = 0;  ///< the plan's; 0: the longest length
  bool causal = true;
  int num_splits = 0;
  Layout q_layout = Layout::bhsd, out_layout = Layout::bhsd;
  bool lse = true;
  std::optional<DType> fp8;  ///< the cache's FP8 format (e4m3, e5m2), with random descale factors
  std::optional<std::array<std::int64_t, 2>> descale_strides;  ///< as jit::KvCache takes them
  bool descale_per_page = false;  ///< the factors per (page, KV head) of a paged pool
};

DType kv_dtype_of(const KvCase& c) { return c.fp8.value_or(c.dtype); }

std::int64_t batch_of(const KvCase& c) { return std::int64_t(c.cache.lengths.size()); }

std::int64_t max_seq_k_of(const KvCase& c) {
  if (c.max_seq_k > 0) return c.max_seq_k;
  return c.cache.lengths.empty() ? 0 : *std::max_element(c.cache.lengths.begin(), c.cache.lengths.end());
}

std::string case_name(const KvCase& c) {
  const auto& lengths = c.cache.lengths;
  std::string layout = to_string(c.cache.layout);
  if (is_paged(c.cache.layout)) layout += fmt::format("{}", c.cache.page_size);
  std::string name = fmt::format("{}_d{}_b{}_h{}x{}_sq{}_{}_L{}_{}", jit::to_string(c.dtype), c.cache.head_dim,
                                 batch_of(c), c.heads_q, c.cache.heads_kv, c.seq_q, layout, fmt::join(lengths, "_"),
                                 c.causal ? "causal" : "full");
  if (!c.seq_lens) name += "_nolens";
  if (c.max_seq_k > 0) name += fmt::format("_maxk{}", c.max_seq_k);
  if (c.cache.capacity > 0) name += fmt::format("_cap{}", c.cache.capacity);
  if (c.cache.table_padding > 0) name += fmt::format("_tpad{}", c.cache.table_padding);
  if (c.num_splits > 0) name += fmt::format("_splits{}", c.num_splits);
  if (c.q_layout != Layout::bhsd || c.out_layout != Layout::bhsd) {
    name += fmt::format("_q{}_o{}", to_string(c.q_layout), to_string(c.out_layout));
  }
  if (!c.lse) name += "_nolse";
  if (c.fp8) name += fmt::format("_kv{}", jit::to_string(*c.fp8));
  if (c.descale_strides) name += fmt::format("_descale{}x{}", (*c.descale_strides)[0], (*c.descale_strides)[1]);
  if (c.descale_per_page) name += "_pagescale";
  return name;
}

void PrintTo(const KvCase& c, std::ostream* os) { *os << case_name(c); }

std::string param_name(const ::testing::TestParamInfo<KvCase>& info) { return case_name(info.param); }

jit::KvAttentionShape shape_of(const KvCase& c) {
  jit::KvAttentionShape s;
  s.batch = batch_of(c);
  s.heads_q = c.heads_q;
  s.heads_kv = c.cache.heads_kv;
  s.head_dim = c.cache.head_dim;
  s.dtype = c.dtype;
  if (c.fp8) s.kv_dtype = *c.fp8;
  s.seq_q = c.seq_q;
  s.max_seq_k = max_seq_k_of(c);
  s.page_size = is_paged(c.cache.layout) ? c.cache.page_size : 0;
  s.per_sequence_lengths = c.seq_lens;
  s.descale_per_page = c.descale_per_page;
  return s;
}

jit::KvAttentionOptions options_of(const KvCase& c) {
  jit::KvAttentionOptions o;
  o.causal = c.causal;
  o.num_splits = c.num_splits;
  return o;
}

// ---------------------------------------------------------------------------
// Inputs, outputs and the comparison with the reference

jit::DeviceBuffer upload_i32(const std::vector<std::int32_t>& values) {
  return upload_bytes(values.data(), values.size() * sizeof(std::int32_t));
}

std::vector<std::int32_t> as_i32(const std::vector<std::int64_t>& values) {
  return std::vector<std::int32_t>(values.begin(), values.end());
}

struct KvInputs {
  std::vector<float> q;  ///< logical [B, Hq, Sq, D]
  TestTensor dq;
  KvCacheImage image;
  KvReferenceProblem reference;
  jit::DeviceBuffer k_mem, v_mem, table_mem, lens_mem, k_descale_mem, v_descale_mem;
  jit::KvCache cache;
};

// FP8: descale factors where the strides reach, as the kernel reads them,
// and the reference's [B * Hkv] (per page: [num_pages * Hkv]) factors from
// the same entries. In [0.25, 2); per page in [2^-6, 4), so that a
// sequence's pages differ by up to 2^8.
void add_descales(const KvCase& c, TestRng& rng, KvInputs& in) {
  const std::int64_t outer = c.descale_per_page ? in.cache.k.shape[0] : batch_of(c), H = c.cache.heads_kv;
  const std::array<std::int64_t, 2> strides = c.descale_strides.value_or(std::array<std::int64_t, 2>{H, 1});
  const std::int64_t entries = std::max<std::int64_t>(outer - 1, 0) * strides[0] + (H - 1) * strides[1] + 1;
  auto make = [&](jit::DeviceBuffer& mem, std::vector<double>& reference) {
    std::vector<float> factors(static_cast<std::size_t>(entries));
    for (float& f : factors) {
      f = c.descale_per_page ? float(std::exp2(8 * rng.uniform() - 6)) : float(0.25 + 1.75 * rng.uniform());
    }
    mem = upload_bytes(factors.data(), factors.size() * sizeof(float));
    reference.clear();
    for (std::int64_t b = 0; b < outer; ++b)
      for (std::int64_t h = 0; h < H; ++h) reference.push_back(factors[std::size_t(b * strides[0] + h * strides[1])]);
  };
  make(in.k_descale_mem, in.reference.k_descale);
  make(in.v_descale_mem, in.reference.v_descale);
  in.reference.descale_per_page = c.descale_per_page;
  in.cache.k_descale = static_cast<const float*>(in.k_descale_mem.data());
  in.cache.v_descale = static_cast<const float*>(in.v_descale_mem.data());
  in.cache.descale_strides = c.descale_strides;
  in.cache.descale_per_page = c.descale_per_page;
}

KvInputs make_kv_inputs(const KvCase& c, TestRng& rng) {
  const std::int64_t max_seq_k = max_seq_k_of(c);
  for (std::int64_t length : c.cache.lengths) {
    if (length > max_seq_k || (!c.seq_lens && length != max_seq_k)) {
      throw std::logic_error(fmt::format("case {}: length {} with max_seq_k {}", case_name(c), length, max_seq_k));
    }
  }
  const Dims4 q_dims{batch_of(c), c.heads_q, c.seq_q, c.cache.head_dim};
  KvInputs in;
  in.q = rng.normal_vector(std::size_t(count(q_dims)), c.dtype);
  in.dq = make_tensor(c.q_layout, c.dtype, q_dims, &in.q);
  const DType kv_dtype = kv_dtype_of(c);
  in.image = build_kv_cache(c.cache, kv_dtype, rng);
  in.k_mem = upload_values(in.image.k_storage, kv_dtype);
  if (!in.image.v_storage.empty()) in.v_mem = upload_values(in.image.v_storage, kv_dtype);
  void* v_base = in.image.v_storage.empty() ? in.k_mem.data() : in.v_mem.data();  // interleaved: one pool
  in.cache.k = device_view(in.image.cache.k, in.k_mem.data(), kv_dtype);
  in.cache.v = device_view(in.image.cache.v, v_base, kv_dtype);
  if (in.image.cache.paged()) {
    in.table_mem = upload_i32(in.image.cache.block_table);
    in.cache.block_table = static_cast<const std::int32_t*>(in.table_mem.data());
    in.cache.pages_per_seq = in.image.pages_per_seq;
    in.cache.block_table_stride = in.image.block_table_stride;
  }
  if (c.seq_lens) {
    in.lens_mem = upload_i32(as_i32(c.cache.lengths));
    in.cache.seq_lens = static_cast<const std::int32_t*>(in.lens_mem.data());
  }
  in.reference.batch = batch_of(c);
  in.reference.heads_q = c.heads_q;
  in.reference.heads_kv = c.cache.heads_kv;
  in.reference.seq_q = c.seq_q;
  in.reference.head_dim = c.cache.head_dim;
  in.reference.causal = c.causal;
  // The library's default scale, computed in double and kept as a float.
  in.reference.scale = double(float(1.0 / std::sqrt(double(c.cache.head_dim))));
  in.reference.seq_lens = c.cache.lengths;
  if (c.fp8) add_descales(c, rng, in);
  return in;
}

struct KvOutputs {
  TestTensor out;
  jit::DeviceBuffer lse;  ///< float32 [B, Hq, Sq], or none
};

KvOutputs make_outputs(const KvCase& c) {
  KvOutputs o;
  o.out = make_tensor(c.out_layout, c.dtype, {batch_of(c), c.heads_q, c.seq_q, c.cache.head_dim});  // poisoned
  o.lse = jit::DeviceBuffer(c.lse ? std::size_t(batch_of(c) * c.heads_q * c.seq_q) * sizeof(float) : 0);
  poison(o.lse.data(), o.lse.size());
  return o;
}

void repoison(KvOutputs& o) {
  poison(o.out.buffer.data(), o.out.buffer.size());
  poison(o.lse.data(), o.lse.size());
}

jit::KvRunOptions run_options(KvOutputs& o, jit::Stream stream = nullptr, void* workspace = nullptr) {
  jit::KvRunOptions run;
  run.stream = stream;
  run.lse = static_cast<float*>(o.lse.data());
  run.workspace = workspace;
  return run;
}

// Everything a run wrote, bit for bit (after a synchronize).
struct OutputBits {
  std::vector<std::uint16_t> out;
  std::vector<std::uint16_t> lse;  ///< the float32 values as pairs of 16-bit words
  bool operator==(const OutputBits&) const = default;
};

OutputBits read_bits(const KvOutputs& o) {
  return {download_storage(o.out), download_u16(o.lse.data(), o.lse.size() / sizeof(std::uint16_t))};
}

std::size_t differing_elements(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  std::size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
  return n;
}

void expect_same_bits(const OutputBits& got, const OutputBits& want, const std::string& what) {
  EXPECT_EQ(differing_elements(got.out, want.out), 0u) << what << ": O differs in that many 16-bit elements";
  EXPECT_EQ(differing_elements(got.lse, want.lse), 0u) << what << ": LSE differs in that many 16-bit halves";
}

template <typename T>
std::vector<T> rows_of(const std::vector<T>& all, std::int64_t b, std::int64_t per_sequence) {
  return std::vector<T>(all.begin() + b * per_sequence, all.begin() + (b + 1) * per_sequence);
}

// O and the LSE against the float64 reference, sequence by sequence (a wrong
// short sequence would vanish in one batch-wide norm), and nothing written
// outside the output view.
void expect_matches_reference(const KvCase& c, const KvInputs& in, const KvOutputs& o) {
  const ReferenceResult ref = reference_kv_attention(in.reference, in.q, in.image.cache);
  const std::vector<std::uint16_t> storage = download_storage(o.out);
  EXPECT_EQ(count_clobbered_padding(storage, o.out.view), 0)
      << "elements of the output buffer outside the output view were written";
  const std::vector<float> got = gather_logical(storage, o.out.view);
  const std::vector<float> lse = download_f32(o.lse.data(), o.lse.size() / sizeof(float));
  const std::int64_t rows = c.heads_q * c.seq_q, D = c.cache.head_dim;
  for (std::int64_t b = 0; b < batch_of(c); ++b) {
    SCOPED_TRACE(fmt::format("sequence {} of {}: {} keys", b, batch_of(c), in.reference.seq_lens[std::size_t(b)]));
    ReferenceResult one;
    one.o = rows_of(ref.o, b, rows * D);
    one.lse = rows_of(ref.lse, b, rows);
    one.visible_keys = rows_of(ref.visible_keys, b, rows);
    expect_output_matches(rows_of(got, b, rows * D), one, sequence_problem(in.reference, b));
    if (c.lse) expect_lse_matches(rows_of(lse, b, rows), one);
  }
}

// Plans for the case, runs once on the default stream and checks the result.
void plan_run_and_check(const KvCase& c, TestRng& rng) {
  SCOPED_TRACE(case_name(c));
  SCOPED_TRACE(rng.describe());
  KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
  SCOPED_TRACE(fmt::format("plan: {} {} splits {}", plan.family(), plan.variant(), plan.num_splits()));
  plan.run(in.dq.view, in.cache, o.out.view, run_options(o));
  synchronize();
  expect_matches_reference(c, in, o);
}

// ---------------------------------------------------------------------------
// Problems against the reference

class KvAttentionGpu : public ::testing::TestWithParam<KvCase> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

TEST_P(KvAttentionGpu, MatchesReference) {
  TestRng rng;
  plan_run_and_check(GetParam(), rng);
}

KvCase paged_case(DType dtype, std::int64_t heads_q, std::int64_t heads_kv, std::int64_t head_dim,
                  std::int64_t seq_q, KvLayout layout, std::int64_t page_size, std::vector<std::int64_t> lengths,
                  bool causal) {
  KvCase c;
  c.dtype = dtype;
  c.heads_q = heads_q;
  c.seq_q = seq_q;
  c.cache.layout = layout;
  c.cache.heads_kv = heads_kv;
  c.cache.head_dim = head_dim;
  c.cache.page_size = page_size;
  c.cache.lengths = std::move(lengths);
  c.causal = causal;
  return c;
}

// The case over an FP8 cache of the given format instead.
KvCase fp8_case(KvCase c, DType format = DType::e4m3) {
  c.fp8 = format;
  return c;
}

// Page sizes 1, 7 (not a power of two), 16, 64, 256 in each pool layout, with
// lengths 0, 1, page_size - 1, page_size + 1 and a few pages; the second of
// each pair also has a wider table than needed, padded rows and Sq = 4.
std::vector<KvCase> page_size_cases() {
  const KvLayout layouts[] = {KvLayout::paged_vllm, KvLayout::paged_head_major, KvLayout::paged_interleaved};
  const std::int64_t page_sizes[] = {1, 7, 16, 64, 256, 8};  // 8: the smallest compiled page size
  std::vector<KvCase> cases;
  for (std::size_t i = 0; i < std::size(page_sizes); ++i) {
    const std::int64_t ps = page_sizes[i];
    const std::vector<std::int64_t> lengths = {0, 1, ps - 1, ps + 1, 3 * ps + 2, 700};
    cases.push_back(paged_case(DType::f16, 8, 2, 128, 1, layouts[i % 3], ps, lengths, true));
    KvCase wide = paged_case(DType::bf16, 8, 2, 64, 4, layouts[(i + 1) % 3], ps, lengths, false);
    wide.cache.capacity = *std::max_element(lengths.begin(), lengths.end()) + 2 * ps;
    wide.max_seq_k = wide.cache.capacity;
    wide.cache.table_padding = 3;
    cases.push_back(wide);
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(PageSizes, KvAttentionGpu, ::testing::ValuesIn(page_size_cases()), param_name);

// Query heads per KV head 1, 4, 8, 32, and multi-query (Hkv = 1).
std::vector<KvCase> grouped_query_cases() {
  const std::pair<std::int64_t, std::int64_t> heads[] = {{4, 4}, {16, 4}, {16, 2}, {32, 4}, {32, 1}, {8, 1}, {64, 2}};
  std::vector<KvCase> cases;
  for (std::size_t i = 0; i < std::size(heads); ++i) {
    const auto [hq, hkv] = heads[i];
    cases.push_back(paged_case(i % 2 ? DType::bf16 : DType::f16, hq, hkv, 128, i % 3 == 1 ? 4 : 1,
                               KvLayout::paged_vllm, 16, {300, 77, 1, 16}, i % 2 == 0));
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(GroupedQuery, KvAttentionGpu, ::testing::ValuesIn(grouped_query_cases()), param_name);

// Head dims 64 and 128, both dtypes, both masks.
std::vector<KvCase> head_dim_cases() {
  std::vector<KvCase> cases;
  for (std::int64_t d : {64, 128})
    for (DType dtype : {DType::f16, DType::bf16})
      for (bool causal : {true, false})
        cases.push_back(paged_case(dtype, 8, 2, d, 1, KvLayout::paged_interleaved, 64, {1000, 129, 64}, causal));
  return cases;
}
INSTANTIATE_TEST_SUITE_P(HeadDims, KvAttentionGpu, ::testing::ValuesIn(head_dim_cases()), param_name);

// Sq = 1 (decode), 4 and 16 (speculative verification), token-major q and out.
std::vector<KvCase> query_row_cases() {
  std::vector<KvCase> cases;
  for (std::int64_t sq : {1, 4, 16})
    for (bool causal : {true, false}) {
      KvCase c = paged_case(sq == 4 ? DType::bf16 : DType::f16, 16, 2, 128, sq, KvLayout::paged_head_major, 16,
                            {sq, sq + 5, 700, 1}, causal);
      c.q_layout = Layout::bshd;
      c.out_layout = sq == 4 ? Layout::bhsd_padded : Layout::bshd;
      cases.push_back(c);
    }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(QueryRows, KvAttentionGpu, ::testing::ValuesIn(query_row_cases()), param_name);

// Contiguous caches with and without lengths, caches with room past
// max_seq_k, and paged caches without lengths (every sequence max_seq_k keys).
std::vector<KvCase> cache_cases() {
  std::vector<KvCase> cases;
  auto add = [&](KvCase c, bool seq_lens, std::int64_t capacity, std::int64_t table_padding = 0) {
    c.seq_lens = seq_lens;
    c.cache.capacity = capacity;
    c.cache.table_padding = table_padding;
    cases.push_back(c);
  };
  add(paged_case(DType::f16, 8, 1, 128, 1, KvLayout::contiguous_bhsd, 0, {0, 1, 200, 1000}, true), true, 1024);
  add(paged_case(DType::bf16, 8, 2, 128, 4, KvLayout::contiguous_bshd, 0, {0, 1, 200, 1000}, false), true, 1024);
  add(paged_case(DType::bf16, 8, 2, 64, 4, KvLayout::contiguous_bhsd, 0, {777, 777}, true), false, 800);
  add(paged_case(DType::f16, 4, 4, 128, 1, KvLayout::contiguous_bshd, 0, {777, 777, 777}, false), false, 0);
  add(paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, {500, 500}, true), false, 512);
  add(paged_case(DType::bf16, 8, 2, 128, 16, KvLayout::paged_head_major, 64, {200, 200, 200}, false), false, 0, 2);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Caches, KvAttentionGpu, ::testing::ValuesIn(cache_cases()), param_name);

// Chunked prefill: 200 new rows appended to a prefix of 3000 keys (and of
// 250), paged and contiguous.
std::vector<KvCase> chunked_prefill_cases() {
  std::vector<KvCase> cases;
  for (DType dtype : {DType::f16, DType::bf16})
    for (bool causal : {true, false})
      cases.push_back(paged_case(dtype, 8, 2, 128, 200, KvLayout::paged_vllm, 64, {3200, 450}, causal));
  cases.push_back(paged_case(DType::f16, 8, 2, 128, 200, KvLayout::paged_head_major, 16, {3200, 450}, true));
  KvCase contiguous = paged_case(DType::bf16, 8, 2, 128, 200, KvLayout::contiguous_bshd, 0, {3200, 450}, true);
  contiguous.cache.capacity = 4096;
  cases.push_back(contiguous);
  // The sm90 family's page sizes (on sm_90a: chunks of 128 rows or more):
  // pages holding several blocks (256), pages of 8, no keys and chunks longer
  // than their sequence (rows that see no key), MHA at head dim 256 without
  // the mask, MQA over a contiguous cache.
  cases.push_back(paged_case(DType::f16, 8, 2, 128, 200, KvLayout::paged_vllm, 256, {3200, 450, 0, 150}, true));
  cases.push_back(paged_case(DType::bf16, 16, 2, 64, 256, KvLayout::paged_head_major, 8, {700, 1, 300}, true));
  cases.push_back(paged_case(DType::f16, 4, 4, 256, 130, KvLayout::paged_interleaved, 64, {520, 129}, false));
  KvCase mqa = paged_case(DType::bf16, 8, 1, 128, 300, KvLayout::contiguous_bshd, 0, {1000, 2, 777}, true);
  mqa.cache.capacity = 1100;
  cases.push_back(mqa);
  // Rows gathered from pages of sizes TMA does not load: one key, seven,
  // 24 (D = 256), 100 (neither a power of two nor a part of a block), with
  // sequences shorter and longer than a page.
  cases.push_back(paged_case(DType::bf16, 8, 2, 128, 130, KvLayout::paged_vllm, 1, {300, 1, 0, 200}, true));
  cases.push_back(paged_case(DType::f16, 16, 4, 64, 150, KvLayout::paged_interleaved, 7, {150, 6, 8, 401}, true));
  cases.push_back(paged_case(DType::f16, 8, 2, 256, 200, KvLayout::paged_head_major, 24, {500, 23, 25}, false));
  cases.push_back(paged_case(DType::bf16, 32, 8, 128, 256, KvLayout::paged_vllm, 100, {1000, 99, 101}, true));
  return cases;
}
INSTANTIATE_TEST_SUITE_P(ChunkedPrefill, KvAttentionGpu, ::testing::ValuesIn(chunked_prefill_cases()), param_name);

// One long sequence (32k+ keys): few (sequence, KV head) pairs, so the key
// range is split across CTAs.
std::vector<KvCase> long_cases() {
  std::vector<KvCase> cases;
  cases.push_back(paged_case(DType::bf16, 32, 8, 128, 1, KvLayout::paged_vllm, 16, {33000}, true));
  KvCase mqa = paged_case(DType::f16, 8, 1, 128, 1, KvLayout::contiguous_bhsd, 0, {32768}, false);
  mqa.seq_lens = false;
  cases.push_back(mqa);
  cases.push_back(paged_case(DType::f16, 32, 8, 64, 4, KvLayout::paged_head_major, 256, {40000}, true));
  cases.push_back(paged_case(DType::bf16, 16, 2, 128, 1, KvLayout::paged_interleaved, 64, {32769, 3}, false));
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Long, KvAttentionGpu, ::testing::ValuesIn(long_cases()), param_name);

// Head dim 256: an sm_90a GPU must serve it; elsewhere the call may say
// Unsupported (and is checked when it succeeds). Over an FP8 cache, and
// before sm_90, it is served with at most 8 query rows per KV head.
class KvAttentionHeadDim256Gpu : public KvAttentionGpu {};

TEST_P(KvAttentionHeadDim256Gpu, MatchesReferenceOrIsUnsupported) {
  const std::string arch = jit::current_target().arch;
  TestRng rng;
  try {
    plan_run_and_check(GetParam(), rng);
  } catch (const jit::Error& e) {
    if (e.code() != jit::ErrorCode::Unsupported || arch == "sm_90a") throw;
    GTEST_SKIP() << "head dim 256 is not served on " << arch << ": " << e.what();
  }
}

std::vector<KvCase> head_dim_256_cases() {
  KvCase e5m2 = fp8_case(paged_case(DType::bf16, 16, 2, 256, 1, KvLayout::contiguous_bhsd, 0, {900, 1, 64}, false),
                         DType::e5m2);
  e5m2.cache.capacity = 960;
  return {paged_case(DType::f16, 8, 2, 256, 1, KvLayout::paged_vllm, 16, {500, 17, 0}, true),
          paged_case(DType::bf16, 8, 2, 256, 4, KvLayout::paged_vllm, 16, {500, 17, 0}, false),
          fp8_case(paged_case(DType::f16, 8, 2, 256, 2, KvLayout::paged_head_major, 16, {500, 17, 0}, true)),
          e5m2};
}
INSTANTIATE_TEST_SUITE_P(HeadDim256, KvAttentionHeadDim256Gpu, ::testing::ValuesIn(head_dim_256_cases()),
                         param_name);

// FP8 (e4m3) caches: the grid above, converted (fp8_case). The values are
// e4m3 draws of N(0, 1) and the descale factors random per (sequence, KV
// head), one per KV head, or one for the cache; the reference attends to
// their products, so the tolerance is the 16-bit cache's.
std::vector<KvCase> fp8_cases() {
  std::vector<KvCase> cases;
  const KvLayout layouts[] = {KvLayout::paged_vllm, KvLayout::paged_head_major, KvLayout::paged_interleaved};
  const std::int64_t page_sizes[] = {1, 7, 16, 64, 256, 8};  // 8: the smallest compiled page size
  for (std::size_t i = 0; i < std::size(page_sizes); ++i) {
    const std::int64_t ps = page_sizes[i];
    const std::vector<std::int64_t> lengths = {0, 1, ps - 1, ps + 1, 3 * ps + 2, 700};
    cases.push_back(fp8_case(paged_case(DType::f16, 8, 2, 128, 1, layouts[i % 3], ps, lengths, true)));
    cases.push_back(fp8_case(paged_case(DType::bf16, 8, 2, 64, 4, layouts[(i + 1) % 3], ps, lengths, false)));
  }
  // Query heads per KV head 1, 4, 8, 32 (MQA), and speculative rows.
  const std::pair<std::int64_t, std::int64_t> heads[] = {{4, 4}, {16, 4}, {32, 4}, {32, 1}, {8, 1}};
  for (std::size_t i = 0; i < std::size(heads); ++i) {
    const auto [hq, hkv] = heads[i];
    cases.push_back(fp8_case(paged_case(i % 2 ? DType::bf16 : DType::f16, hq, hkv, 128, i % 3 == 1 ? 4 : 1,
                                        KvLayout::paged_vllm, 16, {300, 77, 1, 16}, i % 2 == 0)));
  }
  for (std::int64_t d : {64, 128})
    for (DType dtype : {DType::f16, DType::bf16})
      cases.push_back(fp8_case(paged_case(dtype, 8, 2, d, 16, KvLayout::paged_interleaved, 64, {1000, 129, 64},
                                          dtype == DType::f16)));
  // Contiguous caches, with and without lengths; one factor per KV head and
  // one for the whole cache.
  KvCase contiguous = fp8_case(paged_case(DType::bf16, 8, 2, 128, 1, KvLayout::contiguous_bshd, 0, {0, 1, 200, 1000}, true));
  contiguous.cache.capacity = 1024;
  contiguous.descale_strides = std::array<std::int64_t, 2>{0, 1};
  cases.push_back(contiguous);
  KvCase no_lengths = fp8_case(paged_case(DType::f16, 4, 4, 128, 1, KvLayout::contiguous_bhsd, 0, {777, 777}, false));
  no_lengths.seq_lens = false;
  no_lengths.descale_strides = std::array<std::int64_t, 2>{0, 0};
  cases.push_back(no_lengths);
  // Chunked prefill against a paged prefix, and long sequences (split).
  cases.push_back(fp8_case(paged_case(DType::f16, 8, 2, 128, 200, KvLayout::paged_vllm, 64, {3200, 450}, true)));
  cases.push_back(fp8_case(paged_case(DType::bf16, 32, 8, 128, 1, KvLayout::paged_vllm, 16, {33000}, true)));
  KvCase mqa = fp8_case(paged_case(DType::f16, 32, 1, 128, 1, KvLayout::contiguous_bhsd, 0, {32768, 5000}, false));
  cases.push_back(mqa);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Fp8Cache, KvAttentionGpu, ::testing::ValuesIn(fp8_cases()), param_name);

// e5m2 caches (vLLM's fp8_e5m2): the same conversion path with a byte
// permute instead of e4m3's cvt. Every page size and layout, both output
// types, D 64 and 128, GQA 1 to 32, speculative rows, a chunked prefill, a
// long split sequence and a contiguous cache without lengths.
std::vector<KvCase> e5m2_cases() {
  std::vector<KvCase> cases;
  const KvLayout layouts[] = {KvLayout::paged_vllm, KvLayout::paged_head_major, KvLayout::paged_interleaved};
  const std::int64_t page_sizes[] = {1, 7, 16, 64, 256, 8};  // 8: the smallest compiled page size
  for (std::size_t i = 0; i < std::size(page_sizes); ++i) {
    const std::int64_t ps = page_sizes[i];
    const std::vector<std::int64_t> lengths = {0, 1, ps - 1, ps + 1, 3 * ps + 2, 700};
    const DType dtype = i % 2 ? DType::bf16 : DType::f16;
    cases.push_back(fp8_case(paged_case(dtype, 8, 2, i % 2 ? 64 : 128, 1, layouts[i % 3], ps, lengths, i % 2 == 0),
                             DType::e5m2));
  }
  const std::pair<std::int64_t, std::int64_t> heads[] = {{4, 4}, {32, 1}, {16, 4}};
  for (std::size_t i = 0; i < std::size(heads); ++i) {
    const auto [hq, hkv] = heads[i];
    cases.push_back(fp8_case(paged_case(i % 2 ? DType::bf16 : DType::f16, hq, hkv, 128, i == 2 ? 4 : 1,
                                        KvLayout::paged_vllm, 16, {300, 77, 1, 16}, true),
                             DType::e5m2));
  }
  cases.push_back(fp8_case(paged_case(DType::bf16, 8, 2, 128, 200, KvLayout::paged_vllm, 64, {3200, 450}, true),
                           DType::e5m2));
  cases.push_back(fp8_case(paged_case(DType::f16, 32, 8, 128, 1, KvLayout::paged_vllm, 16, {33000}, true),
                           DType::e5m2));
  KvCase no_lengths =
      fp8_case(paged_case(DType::bf16, 4, 4, 64, 1, KvLayout::contiguous_bhsd, 0, {777, 777}, false), DType::e5m2);
  no_lengths.seq_lens = false;
  no_lengths.descale_strides = std::array<std::int64_t, 2>{0, 0};
  cases.push_back(no_lengths);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(E5m2Cache, KvAttentionGpu, ::testing::ValuesIn(e5m2_cases()), param_name);

// FP8 caches at head dim 64 with at most 4 packed rows per KV head and an
// even number of KV heads decode two KV heads a CTA (attn_decode.cu,
// PAIRED): each head's rows 1 to 4 (GQA 1, 2, 4; speculative and causal
// rows), heads that sit side by side in a key's row (token-major) and apart
// (head-major), descale factors per (sequence, KV head), per KV head and
// one, every way a split's parts merge (one split, two in a cluster on
// sm_90, five through the combine pass), q and out token-major.
std::vector<KvCase> paired_kv_head_cases() {
  std::vector<KvCase> cases;
  KvCase gqa4 = fp8_case(paged_case(DType::f16, 16, 4, 64, 1, KvLayout::contiguous_bshd, 0, {0, 1, 200, 1000, 77},
                                    false));
  gqa4.cache.capacity = 1024;
  cases.push_back(gqa4);
  cases.push_back(fp8_case(paged_case(DType::bf16, 8, 8, 64, 3, KvLayout::paged_vllm, 16, {0, 1, 15, 17, 300}, true)));
  cases.push_back(fp8_case(paged_case(DType::f16, 8, 4, 64, 2, KvLayout::paged_head_major, 7, {2, 100, 999}, true),
                           DType::e5m2));
  KvCase per_head = fp8_case(paged_case(DType::bf16, 4, 2, 64, 1, KvLayout::paged_interleaved, 1, {1, 64, 513}, true));
  per_head.descale_strides = std::array<std::int64_t, 2>{0, 1};
  per_head.q_layout = Layout::bshd;
  per_head.out_layout = Layout::bshd;
  cases.push_back(per_head);
  for (int splits : {1, 2, 5}) {
    KvCase split = fp8_case(paged_case(DType::bf16, 12, 6, 64, 2, KvLayout::paged_vllm, 16, {3000, 1, 1777}, true));
    split.num_splits = splits;
    if (splits == 5) split.descale_strides = std::array<std::int64_t, 2>{0, 0};
    cases.push_back(split);
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(PairedKvHeads, KvAttentionGpu, ::testing::ValuesIn(paired_kv_head_cases()), param_name);

KvCase per_page(KvCase c) {
  c.descale_per_page = true;
  return c;
}

// Paged FP8 caches whose descale factors are per (page, KV head), a
// sequence's pages up to 2^8 apart (attn_decode.cu, PAGE_DESCALE): blocks
// of 8 rows (keys as the MMA's rows; GQA 4 and 2 x 4 speculative rows) and
// of 16 and 64 (GQA 16, a chunked prefill), two KV heads a CTA (D = 64,
// token-major), D = 256, e5m2, every pool layout and page sizes 1, 7, 16,
// 64; splits merged in a cluster and by the combine pass; factors per page
// and KV head, per page alone and one for all.
std::vector<KvCase> page_descale_cases() {
  std::vector<KvCase> cases;
  cases.push_back(per_page(fp8_case(paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16,
                                               {0, 1, 15, 17, 700}, true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::bf16, 32, 2, 128, 1, KvLayout::paged_head_major, 7,
                                               {1, 100, 333}, true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::f16, 8, 2, 128, 4, KvLayout::paged_interleaved, 64,
                                               {4, 63, 65, 500}, false))));
  cases.push_back(per_page(fp8_case(paged_case(DType::f16, 16, 4, 64, 1, KvLayout::paged_vllm, 16,
                                               {0, 1, 15, 17, 300}, true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::bf16, 8, 8, 64, 2, KvLayout::paged_vllm, 1, {1, 2, 77}, true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::bf16, 16, 2, 128, 1, KvLayout::paged_interleaved, 1,
                                               {1, 50, 129}, true),
                                    DType::e5m2)));
  cases.push_back(per_page(fp8_case(paged_case(DType::bf16, 8, 2, 256, 1, KvLayout::paged_vllm, 16, {1, 300, 1000},
                                               true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::f16, 8, 2, 128, 200, KvLayout::paged_vllm, 64, {3200, 450},
                                               true))));
  cases.push_back(per_page(fp8_case(paged_case(DType::bf16, 32, 8, 128, 1, KvLayout::paged_vllm, 16, {33000}, true))));
  for (int splits : {2, 5}) {
    KvCase split = per_page(fp8_case(paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, {3000, 1, 1777},
                                                true)));
    split.num_splits = splits;
    cases.push_back(split);
  }
  KvCase per_page_alone = per_page(fp8_case(paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16,
                                                       {5, 400}, true)));
  per_page_alone.descale_strides = std::array<std::int64_t, 2>{1, 0};
  cases.push_back(per_page_alone);
  KvCase one_for_all = per_page(fp8_case(paged_case(DType::bf16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, {5, 400},
                                                    true)));
  one_for_all.descale_strides = std::array<std::int64_t, 2>{0, 0};
  cases.push_back(one_for_all);
  return cases;
}
INSTANTIATE_TEST_SUITE_P(PageDescale, KvAttentionGpu, ::testing::ValuesIn(page_descale_cases()), param_name);

// Every kept config of the decode family, each against the reference, on
// blocks of 8 packed rows (keys as the MMA's rows: a GQA group of 4 or 8,
// 2 x 4 speculative rows, head dim 256 over e4m3), of 16 and of 64, over
// 16-bit and FP8 caches, paged and contiguous: every block size, warp count
// and ring depth meets a length of 0, lengths past a block and, paged,
// pages out of order.
class KvEveryConfigGpu : public ::testing::TestWithParam<KvCase> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

TEST_P(KvEveryConfigGpu, MatchesReference) {
  const KvCase& c = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::detail::AttnProblem problem = jit::detail::kv_problem_of(shape_of(c), options_of(c));
  const int configs = for_every_config(problem, [&](const jit::detail::AttentionFamily& family,
                                                    const jit::detail::AttnPlan& plan, void* workspace) {
    repoison(o);
    jit::detail::AttnTensors tensors{in.dq.view,
                                     in.cache.k,
                                     in.cache.v,
                                     o.out.view,
                                     static_cast<float*>(o.lse.data()),
                                     in.cache.block_table,
                                     jit::detail::table_stride_of(in.cache),
                                     in.cache.seq_lens};
    tensors.k_descale = in.cache.k_descale;
    tensors.v_descale = in.cache.v_descale;
    tensors.descale_strides = jit::detail::descale_strides_of(problem, in.cache);
    family.launch(plan, problem, tensors, workspace, nullptr);
    synchronize();
    expect_matches_reference(c, in, o);
  });
  EXPECT_GT(configs, 1) << "the family keeps more than one config for " << case_name(c);
}

std::vector<KvCase> every_config_cases() {
  const std::vector<std::int64_t> lengths = {0, 1, 15, 17, 300, 1500};
  KvCase gqa4 = paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, lengths, true);
  KvCase gqa8_fp8 = fp8_case(paged_case(DType::bf16, 16, 2, 128, 1, KvLayout::contiguous_bshd, 0, lengths, false));
  gqa8_fp8.cache.capacity = 1536;
  KvCase speculative = paged_case(DType::bf16, 4, 2, 64, 4, KvLayout::paged_head_major, 7, lengths, true);
  KvCase fp8_d64 = fp8_case(paged_case(DType::f16, 8, 2, 64, 1, KvLayout::paged_interleaved, 64, lengths, true),
                            DType::e5m2);
  KvCase rows16_fp8 = fp8_case(paged_case(DType::f16, 32, 2, 128, 1, KvLayout::paged_vllm, 16, lengths, true));
  KvCase d256_fp8 = fp8_case(paged_case(DType::bf16, 8, 2, 256, 1, KvLayout::paged_vllm, 16, lengths, true));
  // Two KV heads a CTA (PAIRED): 2 x 2 speculative rows, token-major.
  KvCase paired_fp8 = fp8_case(paged_case(DType::bf16, 4, 2, 64, 2, KvLayout::contiguous_bshd, 0, lengths, true));
  paired_fp8.cache.capacity = 1536;
  // Descale factors per page, blocks of 8 rows and of 16.
  KvCase page_descale = fp8_case(paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, lengths, true));
  page_descale.descale_per_page = true;
  KvCase page_descale_rows16 =
      fp8_case(paged_case(DType::bf16, 32, 2, 128, 1, KvLayout::paged_head_major, 7, lengths, true));
  page_descale_rows16.descale_per_page = true;
  // Blocks of 64 rows, where sm_90a also has warpgroup-MMA configs: MQA at
  // 64 query heads over a contiguous cache, and 16 query heads a KV head
  // times 4 speculative rows over pages of 16.
  KvCase mqa = paged_case(DType::bf16, 64, 1, 128, 1, KvLayout::contiguous_bshd, 0, lengths, false);
  mqa.cache.capacity = 1536;
  KvCase rows64 = paged_case(DType::f16, 32, 2, 64, 4, KvLayout::paged_vllm, 16, lengths, true);
  // Blocks of 8 rows over a 16-bit contiguous cache at head dim 128, whose
  // loads step their source pointers (decode v17), head-major and causal.
  KvCase gqa4_contiguous = paged_case(DType::f16, 8, 2, 128, 1, KvLayout::contiguous_bhsd, 0, lengths, true);
  gqa4_contiguous.cache.capacity = 1536;
  // A 16-bit pool whose pages hold several blocks of 32 keys (the variants
  // compiled for the page size step through a page), GQA-8, head-major.
  KvCase gqa8_pages64 = paged_case(DType::bf16, 16, 2, 128, 1, KvLayout::paged_head_major, 64, lengths, true);
  // Chunks of 130 query rows, which the sm90 family takes on sm_90a (the
  // decode family elsewhere): over pages of 16 (rows gathered), causal; over
  // pages of 64 at head dim 64 (TMA boxes of a page), causal; and over a
  // contiguous cache at head dim 64 without the mask.
  const std::vector<std::int64_t> chunk_lengths = {0, 1, 129, 200, 1500};
  KvCase chunk_pages16 = paged_case(DType::bf16, 8, 2, 128, 130, KvLayout::paged_vllm, 16, chunk_lengths, true);
  KvCase chunk_pages64 = paged_case(DType::f16, 4, 2, 64, 130, KvLayout::paged_head_major, 64, chunk_lengths, true);
  KvCase chunk_contiguous = paged_case(DType::f16, 4, 4, 64, 130, KvLayout::contiguous_bshd, 0, chunk_lengths, false);
  chunk_contiguous.cache.capacity = 1600;
  return {gqa4,          gqa8_fp8,           speculative, fp8_d64, rows16_fp8,      d256_fp8,     paired_fp8,
          page_descale,  page_descale_rows16, mqa,         rows64,  gqa4_contiguous, gqa8_pages64, chunk_pages16,
          chunk_pages64, chunk_contiguous};
}
INSTANTIATE_TEST_SUITE_P(Decode, KvEveryConfigGpu, ::testing::ValuesIn(every_config_cases()), param_name);

// ---------------------------------------------------------------------------
// The plan's contract

class KvPlanGpu : public ::testing::Test {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

// B = 1, Hkv = 8: 8 (sequence, KV head) pairs for a GPU of ~100 SMs, so the
// plan splits the key range unless told not to.
KvCase split_case(std::int64_t keys) {
  return paged_case(DType::bf16, 32, 8, 128, 1, KvLayout::paged_vllm, 16, {keys}, true);
}

// Whether the GPU has SMs enough that a plan for 8 (sequence, KV head) pairs
// must split to fill it.
bool many_sms() { return jit::current_target().sm_count >= 64; }

OutputBits plan_run(const jit::KvAttentionPlan& plan, const KvInputs& in, KvOutputs& o, void* workspace = nullptr) {
  repoison(o);
  plan.run(in.dq.view, in.cache, o.out.view, run_options(o, nullptr, workspace));
  synchronize();
  return read_bits(o);
}

TEST_F(KvPlanGpu, LongSingleSequenceIsSplit) {
  if (!many_sms()) GTEST_SKIP() << "this GPU has " << jit::current_target().sm_count << " SMs, fewer than 64";
  for (std::int64_t page_size : {0, 16}) {
    SCOPED_TRACE(fmt::format("page size {}", page_size));
    jit::KvAttentionShape s;
    s.batch = 1;
    s.heads_q = 32;
    s.heads_kv = 8;
    s.head_dim = 128;
    s.dtype = DType::bf16;
    s.seq_q = 1;
    s.max_seq_k = 32768;
    s.page_size = page_size;
    s.per_sequence_lengths = true;
    const jit::KvAttentionPlan plan = jit::plan_kv_attention(s);
    EXPECT_GT(plan.num_splits(), 1) << plan.variant();
    EXPECT_GT(plan.workspace_bytes(), 0u) << "a split plan combines partial results through its workspace";
  }
}

TEST_F(KvPlanGpu, OneSplitAndTheChosenSplitsBothMatchTheReference) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  KvCase c = split_case(16384);
  const KvInputs in = make_kv_inputs(c, rng);
  for (int splits : {1, 0}) {
    SCOPED_TRACE(fmt::format("num_splits = {}", splits));
    c.num_splits = splits;
    KvOutputs o = make_outputs(c);
    const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
    if (splits == 1) {
      EXPECT_EQ(plan.num_splits(), 1);
      EXPECT_EQ(plan.workspace_bytes(), 0u);
    } else if (many_sms()) {
      EXPECT_GT(plan.num_splits(), 1);
    }
    plan.run(in.dq.view, in.cache, o.out.view, run_options(o));
    synchronize();
    expect_matches_reference(c, in, o);
  }
}

// On sm_90 up to kMaxDecodeClusterSplits splits merge within their cluster
// (no workspace); more, or older GPUs, use the combine pass.
TEST_F(KvPlanGpu, ClusterMergedAndCombinedSplitsMatchTheReference) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  KvCase c = split_case(16384);
  c.seq_q = 3;  // 12 packed rows of a block's 16: the merge leaves the padding out
  const KvInputs in = make_kv_inputs(c, rng);
  const bool clusters = jit::current_target().cc >= 90;
  for (int splits : {2, 3, 9}) {
    SCOPED_TRACE(fmt::format("num_splits = {}", splits));
    c.num_splits = splits;
    KvOutputs o = make_outputs(c);
    const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
    EXPECT_EQ(plan.num_splits(), splits);
    if (clusters && splits <= cujit::kMaxDecodeClusterSplits) {
      EXPECT_EQ(plan.workspace_bytes(), 0u) << "merged in the cluster";
    } else {
      EXPECT_GT(plan.workspace_bytes(), 0u) << "merged by the combine pass";
    }
    plan.run(in.dq.view, in.cache, o.out.view, run_options(o));
    synchronize();
    expect_matches_reference(c, in, o);
  }
}

int determinism_launches() {
  const char* value = std::getenv("CUJIT_TEST_DETERMINISM_LAUNCHES");
  return value != nullptr && std::atoi(value) > 1 ? std::atoi(value) : 100;
}

// A split plan over a 16-bit cache and over an FP8 one, with the splits the
// plan chooses (the combine pass, on the H100) and with two (merged in
// their cluster on sm_90).
struct BitsCase {
  bool fp8;
  int num_splits;
};

class KvPlanBitsGpu : public ::testing::TestWithParam<BitsCase> {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

TEST_P(KvPlanBitsGpu, SamePlanGivesIdenticalBitsEveryRun) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  KvCase c = split_case(16384);
  if (GetParam().fp8) c.fp8 = DType::e4m3;
  c.num_splits = GetParam().num_splits;
  const KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
  if (many_sms()) {
    EXPECT_GT(plan.num_splits(), 1) << "meant to test the split path and its merge";
  }
  const OutputBits first = plan_run(plan, in, o);
  expect_matches_reference(c, in, o);
  const int launches = determinism_launches();
  for (int i = 1; i < launches; ++i) {
    const OutputBits bits = plan_run(plan, in, o);
    if (bits != first) {
      expect_same_bits(bits, first, fmt::format("run {} against run 0 ({} splits)", i, plan.num_splits()));
      break;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(KvPlan, KvPlanBitsGpu,
                         ::testing::Values(BitsCase{false, 0}, BitsCase{true, 0}, BitsCase{false, 2},
                                           BitsCase{true, 2}),
                         [](const ::testing::TestParamInfo<BitsCase>& info) {
                           return std::string(info.param.fp8 ? "Fp8Cache" : "Cache16") +
                                  (info.param.num_splits > 0 ? fmt::format("Splits{}", info.param.num_splits) : "");
                         });

TEST_F(KvPlanGpu, RunCapturedInAGraphReplaysLikeADirectRun) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  KvCase c = split_case(16384);
  KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
  const OutputBits direct = plan_run(plan, in, o);

  CapturedRun captured;
  repoison(o);
  captured.capture([&](jit::Stream stream) { plan.run(in.dq.view, in.cache, o.out.view, run_options(o, stream)); });
  captured.replay();
  expect_same_bits(read_bits(o), direct, "graph replay against a direct run");

  // The replay reads its inputs when it runs: new queries and a shorter sequence.
  in.q = rng.normal_vector(in.q.size(), c.dtype);
  std::vector<std::uint16_t> q_bits(in.q.size());
  std::transform(in.q.begin(), in.q.end(), q_bits.begin(), [&](float x) { return encode(c.dtype, x); });
  ASSERT_EQ(in.dq.layout, Layout::bhsd);  // logical order is storage order
  copy_to_device(in.dq.buffer.data(), q_bits.data(), q_bits.size() * sizeof(std::uint16_t));
  in.reference.seq_lens = {9000};
  const std::vector<std::int32_t> lengths = as_i32(in.reference.seq_lens);
  copy_to_device(in.lens_mem.data(), lengths.data(), lengths.size() * sizeof(std::int32_t));
  repoison(o);
  captured.replay();
  expect_matches_reference(c, in, o);
}

TEST_F(KvPlanGpu, AttentionWithKvcacheMatchesPlanRun) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  // attention_with_kvcache plans for the cache's capacity; so does this plan.
  KvCase paged = paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, {500, 33, 0}, true);
  paged.cache.capacity = paged.max_seq_k = 640;
  KvCase contiguous = paged_case(DType::bf16, 8, 2, 64, 4, KvLayout::contiguous_bshd, 0, {100, 7}, false);
  contiguous.cache.capacity = contiguous.max_seq_k = 128;
  KvCase full = paged_case(DType::f16, 4, 1, 128, 1, KvLayout::contiguous_bhsd, 0, {300, 300}, true);
  full.seq_lens = false;
  for (const KvCase& c : {paged, contiguous, full}) {
    SCOPED_TRACE(case_name(c));
    const KvInputs in = make_kv_inputs(c, rng);
    KvOutputs o = make_outputs(c);
    const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
    const OutputBits planned = plan_run(plan, in, o);
    repoison(o);
    jit::attention_with_kvcache(in.dq.view, in.cache, o.out.view, options_of(c), run_options(o));
    synchronize();
    expect_same_bits(read_bits(o), planned, "attention_with_kvcache against plan.run");
    expect_matches_reference(c, in, o);
  }
}

TEST_F(KvPlanGpu, CallerSuppliedWorkspaceIsUsed) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const KvCase c = split_case(16384);
  const KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
  if (plan.num_splits() > 1) {
    EXPECT_GT(plan.workspace_bytes(), 0u);
  }
  const OutputBits own = plan_run(plan, in, o);
  // 16 bytes into a poisoned buffer: aligned as documented, and no better.
  jit::DeviceBuffer memory(plan.workspace_bytes() + 16);
  poison(memory.data(), memory.size());
  void* workspace = plan.workspace_bytes() > 0 ? static_cast<char*>(memory.data()) + 16 : nullptr;
  expect_same_bits(plan_run(plan, in, o, workspace), own, "a caller's workspace against the plan's own");
  expect_matches_reference(c, in, o);
}

// The block table and the lengths are read by the kernel: in host memory
// they are refused before any launch, by name.
TEST_F(KvPlanGpu, HostBlockTableOrLengthsAreRefusedByName) {
  TestRng rng;
  const KvCase c = paged_case(DType::f16, 8, 2, 128, 1, KvLayout::paged_vllm, 16, {100, 33}, true);
  KvInputs in = make_kv_inputs(c, rng);
  KvOutputs o = make_outputs(c);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape_of(c), options_of(c));
  const std::vector<std::int32_t> host(std::size_t(in.cache.pages_per_seq) * 2 + 2, 0);
  for (const char* which : {"cache.block_table", "cache.seq_lens"}) {
    SCOPED_TRACE(which);
    jit::KvCache cache = in.cache;
    (std::string(which) == "cache.block_table" ? cache.block_table : cache.seq_lens) = host.data();
    try {
      plan.run(in.dq.view, cache, o.out.view, run_options(o));
      ADD_FAILURE() << "a host pointer was accepted";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(which) + " at "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not GPU memory"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cujit_test
