// jit/varlen.h on the GPU (cujit_gpu_varlen_tests): ragged batches against
// the float64 reference, sequence by sequence, LSE included: mixed lengths,
// empty sequences, queries that see no key, both causal alignments, GQA,
// packed and head-major layouts; rows after the last sequence hold NaN (q)
// or large finite values (k, v: a key that leaked past its sequence would
// dominate the softmax) and the output's must stay untouched. Then every
// kept config of every family here on one mixed batch, bitwise identical
// repeats, CUJIT_CHECK's report of wrong prefix sums, and the plan form
// (one tile list per step, run per layer, in a graph too). main() is
// gpu_test_main.cpp (a fresh cache directory; CUJIT_AUTOTUNE=off unless set).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/attention/attention_problem.h"
#include "jit/attention/l2_share.h"
#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/error.h"
#include "jit/varlen.h"
#include "reference_attention.h"
#include "tests/support/expect_invalid.h"

namespace cujit_test {
namespace {

using jit::DType;

struct VarlenCase {
  DType dtype = DType::f16;
  std::int64_t heads_q = 4, heads_kv = 2, head_dim = 128;
  std::vector<std::int64_t> lens_q, lens_k;  ///< one per sequence
  Mask mask = Mask::bottom_right;
  Layout layout = Layout::bshd;  ///< bshd: packed [total, H, D]; bhsd: [H, total, D]
  std::int64_t tail = 0;         ///< packed rows after the last sequence, in q, k, v and out
  bool lse = true;
};

std::int64_t total(const std::vector<std::int64_t>& lens) { return std::accumulate(lens.begin(), lens.end(), std::int64_t{0}); }
std::int64_t longest(const std::vector<std::int64_t>& lens) {
  return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
}

std::string short_list(const std::vector<std::int64_t>& lens) {
  if (lens.size() <= 6) return fmt::format("{}", fmt::join(lens, "_"));
  return fmt::format("{}x{}to{}", lens.size(), *std::min_element(lens.begin(), lens.end()), longest(lens));
}

std::string case_name(const VarlenCase& c) {
  std::string name = fmt::format("{}_d{}_h{}x{}_q{}_k{}_{}_{}", jit::to_string(c.dtype), c.head_dim, c.heads_q,
                                 c.heads_kv, short_list(c.lens_q), short_list(c.lens_k), mask_name(c.mask),
                                 to_string(c.layout));
  if (c.tail > 0) name += fmt::format("_tail{}", c.tail);
  if (!c.lse) name += "_nolse";
  return name;
}
void PrintTo(const VarlenCase& c, std::ostream* os) { *os << case_name(c); }

std::vector<std::int32_t> prefix_sums(const std::vector<std::int64_t>& lens) {
  std::vector<std::int32_t> cu(lens.size() + 1, 0);
  for (std::size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + std::int32_t(lens[b]);
  return cu;
}

// The device side of a case: packed tensors, prefix sums, a poisoned output
// and LSE; and what the reference expects of the sequences' rows.
struct VarlenRun {
  std::vector<float> q, k, v;  // logical [1, H, rows, D], tails included
  TestTensor dq, dk, dv, out;
  jit::DeviceBuffer cu_q, cu_k, lse;
  jit::VarlenBatch batch;
  std::int64_t rows_q = 0, rows_k = 0;  // packed rows, tails included
};

// Rows past the last sequence: NaN in q (never stored: a tile's rows past
// its sequence only feed rows that are not written), large finite values in
// k and v (finite: see jit/varlen.h).
void plant_tail(std::vector<float>& x, std::int64_t heads, std::int64_t rows, std::int64_t first, std::int64_t d,
                float value) {
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t s = first; s < rows; ++s)
      for (std::int64_t i = 0; i < d; ++i) x[logical_index({1, heads, rows, d}, 0, h, s, i)] = value;
}

VarlenRun make_run(const VarlenCase& c, TestRng& rng) {
  VarlenRun r;
  r.rows_q = total(c.lens_q) + c.tail;
  r.rows_k = total(c.lens_k) + c.tail;
  const Dims4 q_dims{1, c.heads_q, r.rows_q, c.head_dim}, kv_dims{1, c.heads_kv, r.rows_k, c.head_dim};
  r.q = rng.normal_vector(std::size_t(count(q_dims)), c.dtype);
  r.k = rng.normal_vector(std::size_t(count(kv_dims)), c.dtype);
  r.v = rng.normal_vector(std::size_t(count(kv_dims)), c.dtype);
  plant_tail(r.q, c.heads_q, r.rows_q, total(c.lens_q), c.head_dim, std::numeric_limits<float>::quiet_NaN());
  plant_tail(r.k, c.heads_kv, r.rows_k, total(c.lens_k), c.head_dim, 8.0f);
  plant_tail(r.v, c.heads_kv, r.rows_k, total(c.lens_k), c.head_dim, 1000.0f);
  r.dq = make_tensor(c.layout, c.dtype, q_dims, &r.q);
  r.dk = make_tensor(c.layout, c.dtype, kv_dims, &r.k);
  r.dv = make_tensor(c.layout, c.dtype, kv_dims, &r.v);
  r.out = make_tensor(c.layout, c.dtype, q_dims);  // poisoned
  const std::vector<std::int32_t> cu_q = prefix_sums(c.lens_q), cu_k = prefix_sums(c.lens_k);
  r.cu_q = upload_bytes(cu_q.data(), cu_q.size() * sizeof(std::int32_t));
  r.cu_k = upload_bytes(cu_k.data(), cu_k.size() * sizeof(std::int32_t));
  r.lse = jit::DeviceBuffer(c.lse ? std::size_t(c.heads_q * r.rows_q) * sizeof(float) : 0);
  poison(r.lse.data(), r.lse.size());
  r.batch.cu_seqlens_q = static_cast<const std::int32_t*>(r.cu_q.data());
  r.batch.cu_seqlens_k = static_cast<const std::int32_t*>(r.cu_k.data());
  r.batch.batch = std::int64_t(c.lens_q.size());
  r.batch.max_seqlen_q = longest(c.lens_q);
  r.batch.max_seqlen_k = longest(c.lens_k);
  return r;
}

jit::AttentionOptions options_of(const VarlenCase& c, const VarlenRun& r) {
  jit::AttentionOptions o;
  o.causal = c.mask != Mask::none;
  o.align = c.mask == Mask::bottom_right ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  o.lse = c.lse ? static_cast<float*>(r.lse.data()) : nullptr;
  return o;
}

// The reference over the whole packed batch: each sequence on its own, its
// rows placed where the packed output has them; rows past the last sequence
// are left out of the comparison (their count is checked separately).
struct PackedReference {
  ReferenceProblem problem;  // for expect_output_matches: head_dim
  ReferenceResult result;    // o [1, Hq, total_q, D], lse and visible keys [Hq, total_q]
};

PackedReference packed_reference(const VarlenCase& c, const VarlenRun& r) {
  const std::int64_t Hq = c.heads_q, Hkv = c.heads_kv, D = c.head_dim, tq = total(c.lens_q);
  PackedReference ref;
  ref.problem.head_dim = D;
  ref.result.o.assign(std::size_t(Hq * tq * D), 0.0);
  ref.result.lse.assign(std::size_t(Hq * tq), 0.0);
  ref.result.visible_keys.assign(std::size_t(Hq * tq), 0);
  std::int64_t q0 = 0, k0 = 0;
  for (std::size_t b = 0; b < c.lens_q.size(); ++b) {
    const std::int64_t lq = c.lens_q[b], lk = c.lens_k[b];
    if (lq > 0) {
      const ReferenceProblem p = sequence_problem(Hq, Hkv, lq, lk, D, c.mask);
      std::vector<float> qb(std::size_t(Hq * lq * D)), kb(std::size_t(Hkv * lk * D)), vb(std::size_t(Hkv * lk * D));
      for (std::int64_t h = 0; h < Hq; ++h)
        for (std::int64_t s = 0; s < lq; ++s)
          for (std::int64_t d = 0; d < D; ++d)
            qb[logical_index({1, Hq, lq, D}, 0, h, s, d)] = r.q[logical_index({1, Hq, r.rows_q, D}, 0, h, q0 + s, d)];
      for (std::int64_t h = 0; h < Hkv; ++h)
        for (std::int64_t s = 0; s < lk; ++s)
          for (std::int64_t d = 0; d < D; ++d) {
            kb[logical_index({1, Hkv, lk, D}, 0, h, s, d)] = r.k[logical_index({1, Hkv, r.rows_k, D}, 0, h, k0 + s, d)];
            vb[logical_index({1, Hkv, lk, D}, 0, h, s, d)] = r.v[logical_index({1, Hkv, r.rows_k, D}, 0, h, k0 + s, d)];
          }
      const ReferenceResult rb = reference_attention(p, qb, kb, vb);
      for (std::int64_t h = 0; h < Hq; ++h)
        for (std::int64_t s = 0; s < lq; ++s) {
          const std::size_t row = std::size_t(h * tq + q0 + s), src = std::size_t(h * lq + s);
          ref.result.lse[row] = rb.lse[src];
          ref.result.visible_keys[row] = rb.visible_keys[src];
          for (std::int64_t d = 0; d < D; ++d) ref.result.o[row * std::size_t(D) + std::size_t(d)] = rb.o[src * std::size_t(D) + std::size_t(d)];
        }
    }
    q0 += lq;
    k0 += lk;
  }
  return ref;
}

// The output's rows of the sequences (logical [1, Hq, total_q, D]), and how
// many elements of the rows after them were written.
struct PackedOutput {
  std::vector<float> rows;
  std::int64_t tail_written = 0;
};

PackedOutput read_output(const VarlenCase& c, const VarlenRun& r) {
  const std::vector<std::uint16_t> storage = download_storage(r.out);
  const std::vector<float> all = gather_logical(storage, r.out.view);
  const std::int64_t Hq = c.heads_q, D = c.head_dim, tq = total(c.lens_q);
  PackedOutput out;
  out.rows.reserve(std::size_t(Hq * tq * D));
  for (std::int64_t h = 0; h < Hq; ++h)
    for (std::int64_t s = 0; s < r.rows_q; ++s)
      for (std::int64_t d = 0; d < D; ++d) {
        const float x = all[logical_index({1, Hq, r.rows_q, D}, 0, h, s, d)];
        if (s < tq) out.rows.push_back(x);
        else if (!std::isnan(x)) ++out.tail_written;
      }
  out.tail_written += count_clobbered_padding(storage, r.out.view);
  return out;
}

std::vector<float> read_lse(const VarlenCase& c, const VarlenRun& r) {
  const std::vector<float> all = download_f32(r.lse.data(), std::size_t(c.heads_q * r.rows_q));
  std::vector<float> rows;
  for (std::int64_t h = 0; h < c.heads_q; ++h)
    for (std::int64_t s = 0; s < total(c.lens_q); ++s) rows.push_back(all[std::size_t(h * r.rows_q + s)]);
  return rows;
}

void expect_matches(const VarlenCase& c, const VarlenRun& r, const PackedReference& ref) {
  const PackedOutput got = read_output(c, r);
  expect_output_matches(got.rows, ref.result, ref.problem);
  EXPECT_EQ(got.tail_written, 0) << "elements of out outside every sequence were written";
  if (c.lse) expect_lse_matches(read_lse(c, r), ref.result);
}

class VarlenAttention : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(VarlenAttention, MatchesTheReferencePerSequence) {
  CUJIT_REQUIRE_GPU();
  const VarlenCase& c = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  VarlenRun r = make_run(c, rng);
  jit::attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
  synchronize();
  expect_matches(c, r, packed_reference(c, r));
}

std::vector<VarlenCase> cases() {
  std::vector<VarlenCase> out;
  // Self-attention prefill of mixed lengths (an empty one among them), every
  // head dim, dtype and mask.
  const std::vector<std::int64_t> mixed = {1, 17, 128, 300, 0, 64, 1000, 129};
  for (std::int64_t d : {64, 128, 256})
    for (DType dtype : {DType::f16, DType::bf16})
      for (Mask mask : {Mask::none, Mask::bottom_right}) {
        VarlenCase c;
        c.dtype = dtype;
        c.head_dim = d;
        c.lens_q = c.lens_k = mixed;
        c.mask = mask;
        out.push_back(c);
      }
  // Appends: new rows against longer keys (a cached prefix in the packed k),
  // both alignments; and more rows than keys (rows that see no key).
  for (Mask mask : {Mask::top_left, Mask::bottom_right}) {
    VarlenCase c;
    c.lens_q = {5, 130, 64, 1};
    c.lens_k = {300, 200, 64, 1025};
    c.mask = mask;
    out.push_back(c);
    c.lens_q = {40, 300, 7};
    c.lens_k = {16, 100, 0};
    out.push_back(c);
  }
  // GQA ratios 1, 4 and 8 (MQA when Hkv = 1), head-major layout, a tail of
  // rows after the last sequence, no LSE.
  for (auto [hq, hkv] : {std::pair{2, 2}, std::pair{8, 2}, std::pair{8, 1}}) {
    VarlenCase c;
    c.heads_q = hq;
    c.heads_kv = hkv;
    c.lens_q = c.lens_k = {200, 33, 511};
    c.layout = Layout::bhsd;
    c.tail = 77;
    out.push_back(c);
  }
  {
    VarlenCase c;
    c.lens_q = c.lens_k = {1, 1, 1};
    c.lse = false;
    c.tail = 3;
    out.push_back(c);
  }
  // Many short sequences, and one long one.
  {
    VarlenCase c;
    for (int b = 0; b < 150; ++b) c.lens_q.push_back((b * 37) % 23);
    c.lens_k = c.lens_q;
    out.push_back(c);
    c.lens_q = c.lens_k = {4000};
    c.head_dim = 64;
    out.push_back(c);
  }
  // More sequences than the prepare step sorts (kSortedMax, 2048): index
  // order, causal and not.
  for (Mask mask : {Mask::none, Mask::bottom_right}) {
    VarlenCase c;
    for (int b = 0; b < 2049; ++b) c.lens_q.push_back((b * 37) % 29);
    c.lens_k = c.lens_q;
    c.lens_k[7] += 70;  // an append among them
    c.mask = mask;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, VarlenAttention, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<VarlenCase>& info) { return case_name(info.param); });

// Every kept config of every family here (sm90 on sm_90a, portable) on one
// mixed causal batch: every tile size meets partial tiles, sequences shorter
// than a tile and tiles that straddle two sequences' rows in q.
class VarlenEveryConfig : public ::testing::TestWithParam<std::tuple<std::int64_t, bool>> {};

TEST_P(VarlenEveryConfig, MatchesTheReference) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.head_dim = std::get<0>(GetParam());
  c.mask = std::get<1>(GetParam()) ? Mask::bottom_right : Mask::none;
  c.lens_q = {70, 1, 0, 257, 192, 63};
  c.lens_k = {70, 300, 5, 257, 192, 63};
  c.tail = 9;
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  VarlenRun r = make_run(c, rng);
  const jit::detail::AttnProblem problem =
      jit::detail::validate_attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
  const PackedReference ref = packed_reference(c, r);
  const int configs = for_every_config(problem, [&](const jit::detail::AttentionFamily& family,
                                                    const jit::detail::AttnPlan& plan, void* workspace) {
    poison(r.out.buffer.data(), r.out.buffer.size());
    poison(r.lse.data(), r.lse.size());
    family.launch(plan, problem,
                  {r.dq.view, r.dk.view, r.dv.view, r.out.view, static_cast<float*>(r.lse.data()), nullptr, 0,
                   nullptr, r.batch.cu_seqlens_q, r.batch.cu_seqlens_k},
                  workspace, nullptr);
    synchronize();
    expect_matches(c, r, ref);
  });
  EXPECT_GT(configs, 0) << "no family here serves a ragged batch of head dim " << c.head_dim;
}

INSTANTIATE_TEST_SUITE_P(Specs, VarlenEveryConfig,
                         ::testing::Combine(::testing::Values(std::int64_t{64}, std::int64_t{128}), ::testing::Bool()),
                         [](const auto& info) {
                           return fmt::format("d{}_{}", std::get<0>(info.param),
                                              std::get<1>(info.param) ? "causal" : "full");
                         });

// The tile order depends on scheduling; the output must not.
TEST(VarlenDeterminism, RepeatsAreBitwiseIdentical) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.lens_q = c.lens_k = {500, 3, 1200, 77, 640, 0, 900};
  TestRng rng;
  VarlenRun r = make_run(c, rng);
  jit::attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
  synchronize();
  const std::vector<std::uint16_t> first = download_storage(r.out);
  for (int i = 0; i < 20; ++i) {
    poison(r.out.buffer.data(), r.out.buffer.size());
    jit::attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
    synchronize();
    ASSERT_EQ(download_storage(r.out), first) << "run " << i + 1 << " differs from the first";
  }
}

// The prepare step's list: every (sequence, m-block) once, each entry with
// its sequence's bounds, in varlen_prepare.cu's order. Without a mask:
// sequences by work (m-blocks x key blocks), largest first, ties by index,
// a sequence's tiles together. Causal: sequences by m-blocks, most first,
// ties by index, in groups by the keys before them (a multiple of the
// group's keys: one group for these lengths, or with as many KV heads as
// would fill L2 with 600 keys, groups of about that), level by level within
// a group (level l: each sequence's l-th m-block from its end). Batches of
// up to 32 sequences are sorted and summed in one warp, larger ones by the
// whole CTA: both, and the sizes at the switch. Past kSortedMax (2048)
// sequences keep index order, each sequence's tiles together (causal: its
// last m-block first).
void expect_prepared_list(VarlenCase c, TestRng& rng);

TEST(VarlenPrepare, ListsEveryTileOnceTheMostWorkFirst) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  VarlenCase c;
  c.lens_q = {100, 0, 300, 300, 64, 1, 513};
  c.lens_k = {100, 7, 300, 300, 900, 1, 513};
  expect_prepared_list(c, rng);
  for (const std::size_t batch : {32, 33, 100, 2048, 2049}) {
    SCOPED_TRACE(fmt::format("{} sequences", batch));
    // Few distinct lengths, so that many sequences tie.
    if (batch > 100) c.heads_q = c.heads_kv = 1;  // the list is per (sequence, m-block); fewer bytes to draw
    c.lens_q.resize(batch);
    c.lens_k.resize(batch);
    for (std::size_t b = 0; b < batch; ++b) {
      c.lens_q[b] = 65 * std::int64_t(rng.uniform() * 5);
      c.lens_k[b] = c.lens_q[b] + std::int64_t(rng.uniform() * 40);
    }
    expect_prepared_list(c, rng);
  }
}

void expect_prepared_list(VarlenCase c, TestRng& rng) {
  VarlenRun r = make_run(c, rng);
  struct Run {
    Mask mask;
    std::int64_t group_keys;  // 0: as the problem is
  };
  for (const Run run : {Run{Mask::none, 0}, Run{Mask::bottom_right, 0}, Run{Mask::bottom_right, 600}}) {
    const Mask mask = run.mask;
    c.mask = mask;
    SCOPED_TRACE(fmt::format("{}, group keys {}", mask == Mask::none ? "full" : "causal", run.group_keys));
    jit::detail::AttnProblem problem =
        jit::detail::validate_attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
    if (run.group_keys > 0) {
      // Only the group size reads the KV heads: as many as make 600 keys'
      // K and V the L2 share.
      problem.heads_kv = jit::detail::kTileGroupL2Bytes /
                         (2 * problem.head_dim * std::int64_t(jit::element_size(problem.kv_dtype())) * run.group_keys);
    }
    const std::int64_t group_keys = jit::detail::varlen_group_key_rows(problem);
    if (run.group_keys > 0) {
      ASSERT_GE(group_keys, run.group_keys);
      ASSERT_LT(group_keys, 700);
    }
    constexpr int kBm = 64, kBn = 128;
    jit::detail::AttnPlan plan;
    jit::detail::add_varlen_prepare_step(plan, problem, kBm, kBn, false);
    plan.steps[0].kernel = &jit::get_kernel(jit::detail::varlen_prepare_family(), jit::Json::object(), jit::Json::object());
    jit::DeviceBuffer workspace(plan.workspace_bytes);
    poison(workspace.data(), workspace.size());
    const jit::detail::AttnTensors t{r.dq.view, r.dk.view, r.dv.view, r.out.view, nullptr, nullptr, 0, nullptr,
                                     r.batch.cu_seqlens_q, r.batch.cu_seqlens_k};
    jit::detail::launch_varlen_prepare(plan.steps[0], problem, t, workspace.data(), nullptr);
    synchronize();
    const jit::detail::VarlenTileList list = jit::detail::varlen_tile_list(workspace.data());
    std::int32_t count = 0;
    copy_to_host(&count, list.count, sizeof count);
    std::vector<cujit::VarlenTile> tiles(std::size_t(std::max(count, 0)));
    copy_to_host(tiles.data(), list.tiles, tiles.size() * sizeof(cujit::VarlenTile));

    // What the list must be: (sequence, m-block) pairs in order.
    const bool causal = mask != Mask::none;
    struct Sorted {
      std::int64_t key, b, m_blocks, keys;
    };
    std::vector<Sorted> sequences;  // with their keys
    std::vector<std::int64_t> q0(c.lens_q.size()), k0(c.lens_q.size());
    for (std::size_t b = 0; b < c.lens_q.size(); ++b) {
      if (b > 0) q0[b] = q0[b - 1] + c.lens_q[b - 1], k0[b] = k0[b - 1] + c.lens_k[b - 1];
      const std::int64_t m_blocks = (c.lens_q[b] + kBm - 1) / kBm;
      const std::int64_t work = causal ? m_blocks : m_blocks * ((c.lens_k[b] + kBn - 1) / kBn);
      if (m_blocks > 0) sequences.push_back({work, std::int64_t(b), m_blocks, c.lens_k[b]});
    }
    constexpr std::size_t kSortedMax = 2048;
    const bool sorted = c.lens_q.size() <= kSortedMax;
    if (sorted) {
      std::stable_sort(sequences.begin(), sequences.end(), [](const Sorted& x, const Sorted& y) { return x.key > y.key; });
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> expected;
    if (!sorted) {
      for (const Sorted& s : sequences)
        for (std::int64_t m = 0; m < s.m_blocks; ++m) expected.push_back({s.b, causal ? s.m_blocks - 1 - m : m});
    } else if (causal) {
      // Groups: runs of sorted sequences whose keys before them divide to
      // the same multiple of group_keys.
      std::vector<std::vector<Sorted>> groups;
      std::int64_t keys_before = 0, last_group = -1;
      for (const Sorted& s : sequences) {
        const std::int64_t group = keys_before / group_keys;
        if (group != last_group) groups.emplace_back();
        groups.back().push_back(s);
        last_group = group;
        keys_before += s.keys;
      }
      if (run.group_keys > 0) {
        EXPECT_GT(groups.size(), 1u);
      }
      for (const std::vector<Sorted>& group : groups)
        for (std::int64_t level = 0; level < group.front().m_blocks; ++level)
          for (const Sorted& s : group)
            if (s.m_blocks > level) expected.push_back({s.b, s.m_blocks - 1 - level});
    } else {
      for (const Sorted& s : sequences)
        for (std::int64_t m = 0; m < s.m_blocks; ++m) expected.push_back({s.b, m});
    }
    std::size_t at = 0;
    for (const auto& [sequence, m_block] : expected) {
      const std::size_t b = std::size_t(sequence);
      ASSERT_LT(at, tiles.size()) << "the list ends early";
      const cujit::VarlenTile& tile = tiles[at++];
      SCOPED_TRACE(fmt::format("slot {}", at - 1));
      EXPECT_EQ(tile.sequence, sequence);
      EXPECT_EQ(tile.m_block, m_block);
      EXPECT_EQ(tile.q_row, q0[b]);
      EXPECT_EQ(tile.k_row, k0[b]);
      EXPECT_EQ(tile.seq_q, c.lens_q[b]);
      EXPECT_EQ(tile.seq_k, c.lens_k[b]);
      EXPECT_EQ(tile.causal_offset, mask == Mask::none ? 0 : c.lens_k[b] - c.lens_q[b]);
    }
    EXPECT_EQ(std::size_t(count), at);
  }
}

// CUJIT_CHECK's device check of the prefix sums: each kind of wrong entry is
// named, with its sequence; right ones pass.
TEST(VarlenCheck, NamesTheFirstWrongSequence) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.lens_q = c.lens_k = {10, 20, 30};
  TestRng rng;
  VarlenRun r = make_run(c, rng);
  const jit::detail::AttnProblem problem =
      jit::detail::validate_attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
  auto check = [&](const std::vector<std::int32_t>& cu_q) {
    const jit::DeviceBuffer bad = upload_bytes(cu_q.data(), cu_q.size() * sizeof(std::int32_t));
    const jit::detail::AttnTensors t{r.dq.view, r.dk.view, r.dv.view, r.out.view, nullptr, nullptr, 0, nullptr,
                                     static_cast<const std::int32_t*>(bad.data()), r.batch.cu_seqlens_k};
    jit::detail::check_varlen_contents(problem, t, nullptr);
  };
  EXPECT_NO_THROW(check({0, 10, 30, 60}));
  const std::vector<std::pair<std::vector<std::int32_t>, std::string>> wrong = {
      {{1, 10, 30, 60}, "sequence 0"},   // does not start at 0
      {{0, 10, 5, 60}, "sequence 1"},    // decreases
      {{0, 10, 30, 61}, "sequence 2"},   // past the packed rows
      {{0, 0, 31, 60}, "sequence 1"},    // 31 rows: past max_seqlen_q (30)
  };
  for (const auto& [cu, named] : wrong) {
    try {
      check(cu);
      ADD_FAILURE() << fmt::format("cu_seqlens_q {} passed the check", cu);
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  }
}


// --- jit::VarlenAttentionPlan: one tile list per step, run for every layer -----

jit::VarlenAttentionPlan plan_for(const VarlenCase& c, const VarlenRun& r) {
  return jit::plan_attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
}

jit::VarlenRunOptions run_options(const VarlenCase& c, const VarlenRun& r, jit::Stream stream = nullptr) {
  return {stream, c.lse ? static_cast<float*>(r.lse.data()) : nullptr, {}, nullptr};
}

// Three layers of one step: each its own q, k, v, out and prefix-sum buffers,
// one prepare from the first layer's. Each layer matches the reference and
// the one-call path's bits.
TEST(VarlenPlan, RunsEveryLayerOverOnePreparedList) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.heads_q = 8;
  c.lens_q = {300, 1, 0, 129, 700};
  c.lens_k = {300, 200, 17, 129, 900};
  c.tail = 5;
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  std::vector<VarlenRun> layers;
  for (int i = 0; i < 3; ++i) layers.push_back(make_run(c, rng));
  const jit::VarlenAttentionPlan plan = plan_for(c, layers[0]);
  EXPECT_GT(plan.workspace_bytes(), 0u);
  // What it launches, by name: a ragged variant of its own family, and the
  // config that variant was made with.
  const std::string family = plan.family(), variant = plan.variant();
  EXPECT_EQ(variant.rfind(family, 0), 0u) << family << " / " << variant;
  EXPECT_NE(variant.find("_varlen"), std::string::npos) << variant;
  EXPECT_TRUE(plan.config().is_object() && plan.config().contains("bm")) << plan.config().dump();
  plan.prepare(layers[0].batch);
  for (VarlenRun& r : layers) plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run_options(c, r));
  synchronize();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    SCOPED_TRACE(fmt::format("layer {}", i));
    VarlenRun& r = layers[i];
    expect_matches(c, r, packed_reference(c, r));
    const std::vector<std::uint16_t> planned = download_storage(r.out);
    poison(r.out.buffer.data(), r.out.buffer.size());
    jit::attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, r.batch, options_of(c, r));
    synchronize();
    EXPECT_EQ(download_storage(r.out), planned) << "the plan's run and attention_varlen differ";
  }
}

// A plan is per composition (sequence count, longest lengths, packed rows);
// new prefix sums of the same composition take effect at the next prepare,
// in a direct run and in a graph that captured prepare and run.
TEST(VarlenPlan, PrepareAgainFollowsNewPrefixSums) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.lens_q = c.lens_k = {100, 640, 260};
  VarlenCase moved = c;
  moved.lens_q = moved.lens_k = {640, 300, 60};
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  VarlenRun r = make_run(c, rng);
  const jit::VarlenAttentionPlan plan = plan_for(c, r);
  plan.prepare(r.batch);
  plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run_options(c, r));
  synchronize();
  expect_matches(c, r, packed_reference(c, r));

  auto write_prefix_sums = [&](const VarlenCase& lens) {
    const std::vector<std::int32_t> cu = prefix_sums(lens.lens_q);
    copy_to_device(r.cu_q.data(), cu.data(), cu.size() * sizeof(std::int32_t));
    copy_to_device(r.cu_k.data(), cu.data(), cu.size() * sizeof(std::int32_t));
  };
  write_prefix_sums(moved);
  poison(r.out.buffer.data(), r.out.buffer.size());
  poison(r.lse.data(), r.lse.size());
  plan.prepare(r.batch);
  plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run_options(moved, r));
  synchronize();
  expect_matches(moved, r, packed_reference(moved, r));

  CapturedRun captured;
  captured.capture([&](jit::Stream stream) {
    plan.prepare(r.batch, stream);
    plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run_options(c, r, stream));
  });
  write_prefix_sums(c);
  poison(r.out.buffer.data(), r.out.buffer.size());
  poison(r.lse.data(), r.lse.size());
  captured.replay();
  expect_matches(c, r, packed_reference(c, r));
}

// Workspaces of the caller's: one plan keeps two lists, for two batches of
// its composition, each prepared into its own memory and run from it in
// turn. Each run matches its batch, and bitwise the plan's own list's run.
TEST(VarlenPlan, KeepsAListInEachOfTheCallersWorkspaces) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.lens_q = c.lens_k = {100, 640, 260};
  VarlenCase moved = c;  // the same composition: 3 sequences, longest 640, 1000 rows
  moved.lens_q = moved.lens_k = {640, 300, 60};
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  VarlenRun a = make_run(c, rng), b = make_run(moved, rng);
  const jit::VarlenAttentionPlan plan = plan_for(c, a);
  jit::DeviceBuffer list_a(plan.workspace_bytes()), list_b(plan.workspace_bytes());
  plan.prepare(a.batch, nullptr, list_a.data());
  plan.prepare(b.batch, nullptr, list_b.data());
  jit::VarlenRunOptions run_a = run_options(c, a), run_b = run_options(moved, b);
  run_a.workspace = list_a.data();
  run_b.workspace = list_b.data();
  plan.run(b.dq.view, b.dk.view, b.dv.view, b.out.view, run_b);
  plan.run(a.dq.view, a.dk.view, a.dv.view, a.out.view, run_a);
  synchronize();
  expect_matches(c, a, packed_reference(c, a));
  expect_matches(moved, b, packed_reference(moved, b));
  const std::vector<std::uint16_t> from_a = download_storage(a.out);
  poison(a.out.buffer.data(), a.out.buffer.size());
  plan.prepare(a.batch);
  plan.run(a.dq.view, a.dk.view, a.dv.view, a.out.view, run_options(c, a));
  synchronize();
  EXPECT_EQ(download_storage(a.out), from_a) << "the caller's workspace and the plan's own differ";
}

// Refused by name before any launch: another composition or other tensors
// than the plan's, prefix sums in host memory, and a workspace that is not
// 16-byte aligned or not this GPU's memory.
TEST(VarlenPlan, RefusesAnotherCompositionOtherTensorsHostMemoryOrAMisalignedWorkspace) {
  CUJIT_REQUIRE_GPU();
  VarlenCase c;
  c.lens_q = c.lens_k = {100, 200};
  TestRng rng;
  VarlenRun r = make_run(c, rng);
  const jit::VarlenAttentionPlan plan = plan_for(c, r);
  jit::VarlenBatch longer = r.batch;
  longer.max_seqlen_k += 1;
  EXPECT_THROW(plan.prepare(longer), jit::Error);
  jit::VarlenBatch fewer = r.batch;
  fewer.batch = 1;
  EXPECT_THROW(plan.prepare(fewer), jit::Error);
  VarlenCase wider = c;
  wider.heads_q = 8;
  VarlenRun w = make_run(wider, rng);
  EXPECT_THROW(plan.run(w.dq.view, w.dk.view, w.dv.view, w.out.view, run_options(wider, w)), jit::Error);
  const std::vector<float> host_lse(std::size_t(c.heads_q * r.rows_q));
  jit::VarlenRunOptions lse_on_host = run_options(c, r);
  lse_on_host.lse = const_cast<float*>(host_lse.data());
  EXPECT_THROW(plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, lse_on_host), jit::Error);

  // The prefix sums are read on the device: in host memory they are refused
  // before any launch, by name, by the one call, the plan and its prepare.
  const std::vector<std::int32_t> host = prefix_sums(c.lens_q);
  jit::VarlenBatch on_host = r.batch;
  on_host.cu_seqlens_k = host.data();
  const std::initializer_list<std::string> named = {"batch.cu_seqlens_k at ", "not GPU memory"};
  expect_invalid(
      [&] { jit::attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, on_host, options_of(c, r)); },
      named);
  expect_invalid(
      [&] { jit::plan_attention_varlen(r.dq.view, r.dk.view, r.dv.view, r.out.view, on_host, options_of(c, r)); },
      named);
  expect_invalid([&] { plan.prepare(on_host); }, named);

  jit::DeviceBuffer list(plan.workspace_bytes() + 16);
  void* misaligned = static_cast<char*>(list.data()) + 8;
  std::vector<std::uint64_t> host_list(plan.workspace_bytes() / 8 + 2);  // 8-byte aligned at least
  void* list_on_host =
      reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(host_list.data()) + 15) & ~std::uintptr_t{15});
  expect_invalid([&] { plan.prepare(r.batch, nullptr, misaligned); }, {"workspace must be 16-byte aligned"});
  expect_invalid([&] { plan.prepare(r.batch, nullptr, list_on_host); }, {"workspace at "});
  jit::VarlenRunOptions run = run_options(c, r);
  run.workspace = misaligned;
  expect_invalid([&] { plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run); },
                 {"run.workspace must be 16-byte aligned"});
  run.workspace = list_on_host;
  expect_invalid([&] { plan.run(r.dq.view, r.dk.view, r.dv.view, r.out.view, run); }, {"run.workspace at "});
  synchronize();
  for (std::uint16_t bits : download_storage(r.out)) ASSERT_EQ(bits, kPoison16) << "a refused call wrote the output";
}

}  // namespace
}  // namespace cujit_test
