// Tests for validate_attention_varlen (jit/attention/attention_problem.h):
// the ragged batch's checks and the problem it yields, the VARLEN spec's
// JSON form and the tune-key bucket of a ragged problem. The pointers are
// fake (never dereferenced), so no GPU is needed.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "jit/attention/attention_problem.h"
#include "tests/support/expect_invalid.h"
#include "jit/error.h"
#include "jit/varlen.h"
#include "kernel_src/attention/attn_params.h"

namespace {

using jit::AttentionOptions;
using jit::CausalAlign;
using jit::DType;
using jit::ErrorCode;
using jit::TensorView;
using jit::VarlenBatch;
using jit::detail::AttnProblem;
using jit::detail::AttnSpec;
using jit::detail::validate_attention_varlen;

void* fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }
const std::int32_t* fake_i32(std::uintptr_t address) { return reinterpret_cast<const std::int32_t*>(address); }
const float* fake_f32(std::uintptr_t address) { return reinterpret_cast<const float*>(address); }

// Far-apart, 16-byte-aligned regions (256 MiB apart; every tensor below is smaller).
constexpr std::uintptr_t kQ = 0x10000000, kK = 0x20000000, kV = 0x30000000, kOut = 0x40000000, kCuQ = 0x50000000,
                         kCuK = 0x60000000;

// Three sequences of 100, 150 and 50 query rows over 200, 250 and 50 keys,
// packed: total_q = 300, total_k = 500; Hq = 8, Hkv = 2, D = 128.
constexpr std::int64_t kBatch = 3, kTotalQ = 300, kTotalK = 500, kMaxQ = 150, kMaxK = 250, kHq = 8, kHkv = 2,
                       kD = 128;

struct Args {
  TensorView q, k, v, out;
  VarlenBatch batch;
};

// Packed [total, H, D] storage, viewed as [1, H, total, D].
Args packed(std::int64_t total_q = kTotalQ, std::int64_t total_k = kTotalK, DType dtype = DType::f16) {
  Args a{TensorView::bshd(fake(kQ), dtype, 1, total_q, kHq, kD), TensorView::bshd(fake(kK), dtype, 1, total_k, kHkv, kD),
         TensorView::bshd(fake(kV), dtype, 1, total_k, kHkv, kD),
         TensorView::bshd(fake(kOut), dtype, 1, total_q, kHq, kD), VarlenBatch{}};
  a.batch.cu_seqlens_q = fake_i32(kCuQ);
  a.batch.cu_seqlens_k = fake_i32(kCuK);
  a.batch.batch = kBatch;
  a.batch.max_seqlen_q = kMaxQ;
  a.batch.max_seqlen_k = kMaxK;
  return a;
}

AttnProblem validate(const Args& a, const AttentionOptions& options = {}) {
  return validate_attention_varlen(a.q, a.k, a.v, a.out, a.batch, options);
}

AttentionOptions causal(CausalAlign align) {
  AttentionOptions o;
  o.causal = true;
  o.align = align;
  return o;
}

// Expects validation to fail with Error(InvalidArgument) naming every needle.
void expect_invalid(const Args& a, std::initializer_list<std::string> needles, const AttentionOptions& options = {}) {
  cujit_test::expect_invalid([&] { validate(a, options); }, needles);
}

}  // namespace

// --- accepted problems -------------------------------------------------------

TEST(ValidateAttentionVarlen, CarriesTheBatchAndThePackedSizes) {
  const AttnProblem p = validate(packed());
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.batch, kBatch);
  EXPECT_EQ(p.heads_q, kHq);
  EXPECT_EQ(p.heads_kv, kHkv);
  EXPECT_EQ(p.head_dim, kD);
  EXPECT_EQ(p.seq_q, kMaxQ);  // the longest sequence's, not the packed rows
  EXPECT_EQ(p.seq_k, kMaxK);
  EXPECT_EQ(p.total_q, kTotalQ);
  EXPECT_EQ(p.total_k, kTotalK);
  EXPECT_EQ(p.dtype, DType::f16);
  EXPECT_FALSE(p.causal);
  EXPECT_FALSE(p.align_bottom_right);
  EXPECT_EQ(p.causal_offset, 0);
  EXPECT_EQ(p.scale, float(1.0 / std::sqrt(double(kD))));
  EXPECT_FALSE(p.kv_cache());
  EXPECT_FALSE(p.empty());
}

TEST(ValidateAttentionVarlen, TakesOptionsAndDtype) {
  AttentionOptions o;
  o.scale = 0.25f;
  o.lse = static_cast<float*>(fake(0x70000000));
  const AttnProblem p = validate(packed(kTotalQ, kTotalK, DType::bf16), o);
  EXPECT_EQ(p.dtype, DType::bf16);
  EXPECT_EQ(p.scale, 0.25f);
}

// The diagonal is each sequence's: the packed sizes' offset (total_k -
// total_q = 200 here) must not leak into causal_offset.
TEST(ValidateAttentionVarlen, CausalAlignmentIsPerSequence) {
  const AttnProblem bottom_right = validate(packed(), causal(CausalAlign::BottomRight));
  EXPECT_TRUE(bottom_right.causal);
  EXPECT_TRUE(bottom_right.align_bottom_right);
  EXPECT_EQ(bottom_right.causal_offset, 0);

  const AttnProblem top_left = validate(packed(), causal(CausalAlign::TopLeft));
  EXPECT_TRUE(top_left.causal);
  EXPECT_FALSE(top_left.align_bottom_right);
  EXPECT_EQ(top_left.causal_offset, 0);

  AttentionOptions unmasked;
  unmasked.align = CausalAlign::BottomRight;  // no effect without causal
  const AttnProblem p = validate(packed(), unmasked);
  EXPECT_FALSE(p.causal);
  EXPECT_FALSE(p.align_bottom_right);

  // Problems that differ only in alignment are different shapes.
  EXPECT_FALSE(bottom_right == top_left);
}

TEST(ValidateAttentionVarlen, AcceptsTheLongestSequenceBeingTheWholeBatch) {
  Args a = packed();
  a.batch.batch = 1;
  a.batch.max_seqlen_q = kTotalQ;
  a.batch.max_seqlen_k = kTotalK;
  const AttnProblem p = validate(a);
  EXPECT_EQ(p.seq_q, kTotalQ);
  EXPECT_EQ(p.seq_k, kTotalK);
}

// Queries that see no key get zeros: work, not an empty problem.
TEST(ValidateAttentionVarlen, NoKeysIsNotEmpty) {
  Args a = packed();
  a.batch.max_seqlen_k = 0;
  EXPECT_FALSE(validate(a).empty());
}

TEST(ValidateAttentionVarlen, AnEmptyBatchNeedsNoPrefixSums) {
  Args a = packed();
  a.batch = VarlenBatch{};  // batch 0, null cu_seqlens, max lengths 0
  const AttnProblem p = validate(a);
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.batch, 0);
  EXPECT_TRUE(p.empty());
}

TEST(ValidateAttentionVarlen, NoQueryRowsIsEmpty) {
  Args a = packed();
  a.batch.max_seqlen_q = 0;  // every sequence has 0 query rows
  EXPECT_TRUE(validate(a).empty());

  Args none = packed(0, kTotalK);
  none.q.data = nullptr;  // an empty view may be null
  none.out.data = nullptr;
  none.batch.max_seqlen_q = 0;
  const AttnProblem p = validate(none);
  EXPECT_EQ(p.total_q, 0);
  EXPECT_TRUE(p.empty());
}

// --- refused arguments ---------------------------------------------------------

TEST(ValidateAttentionVarlen, RejectsTensorsWhoseBatchIsNotOne) {
  const Args base = packed();
  for (TensorView Args::*member : {&Args::q, &Args::k, &Args::v, &Args::out}) {
    Args a = base;
    TensorView& t = a.*member;
    t.shape[0] = 2;
    expect_invalid(a, {"must have batch 1", "TensorView::bshd", "[2, "});
  }
  Args all = base;
  for (TensorView* t : {&all.q, &all.k, &all.v, &all.out}) t->shape[0] = 0;
  expect_invalid(all, {"must have batch 1"});
}

TEST(ValidateAttentionVarlen, RejectsNullPrefixSums) {
  Args a = packed();
  a.batch.cu_seqlens_q = nullptr;
  expect_invalid(a, {"batch.cu_seqlens_q", "4 int32 prefix sums", "null"});
  a = packed();
  a.batch.cu_seqlens_k = nullptr;
  expect_invalid(a, {"batch.cu_seqlens_k", "null"});
}

TEST(ValidateAttentionVarlen, RejectsMisalignedPrefixSums) {
  Args a = packed();
  a.batch.cu_seqlens_q = fake_i32(kCuQ + 2);
  expect_invalid(a, {"batch.cu_seqlens_q", "4-byte aligned"});
  a = packed();
  a.batch.cu_seqlens_k = fake_i32(kCuK + 1);
  expect_invalid(a, {"batch.cu_seqlens_k", "4-byte aligned"});
}

TEST(ValidateAttentionVarlen, RejectsANegativeOrHugeBatch) {
  Args a = packed();
  a.batch.batch = -1;
  expect_invalid(a, {"batch.batch", "negative", "-1"});
  a.batch.batch = std::int64_t{1} << 40;
  expect_invalid(a, {"batch.batch", "at most"});
}

TEST(ValidateAttentionVarlen, RejectsLongestSequencesOutsideThePackedRows) {
  for (std::int64_t bad : {std::int64_t{-1}, kTotalQ + 1}) {
    Args a = packed();
    a.batch.max_seqlen_q = bad;
    expect_invalid(a, {"batch.max_seqlen_q", "(" + std::to_string(bad) + ")", "q's packed rows (300)"});
  }
  for (std::int64_t bad : {std::int64_t{-1}, kTotalK + 1}) {
    Args a = packed();
    a.batch.max_seqlen_k = bad;
    expect_invalid(a, {"batch.max_seqlen_k", "(" + std::to_string(bad) + ")", "k's packed rows (500)"});
  }
}

// validate_attention's checks apply to the packed tensors.
TEST(ValidateAttentionVarlen, InheritsTheTensorChecks) {
  Args a = packed();
  a.v.dtype = DType::bf16;
  expect_invalid(a, {"share one dtype", "v bf16"});

  a = packed();
  a.k = TensorView::bshd(fake(kK), DType::f16, 1, kTotalK, kHkv, 64);
  a.v = TensorView::bshd(fake(kV), DType::f16, 1, kTotalK, kHkv, 64);
  expect_invalid(a, {"same head dim"});

  a = packed();
  a.out = TensorView::bshd(fake(kOut), DType::f16, 1, kTotalQ - 1, kHq, kD);
  expect_invalid(a, {"out must have q's shape"});

  a = packed();
  a.out.data = fake(kQ + 64);
  expect_invalid(a, {"out overlaps q"});

  AttentionOptions bad_scale;
  bad_scale.scale = -1.f;
  expect_invalid(packed(), {"scale"}, bad_scale);
}

TEST(ValidateAttentionVarlen, AcceptsFp8WithDescalesPerSequence) {
  Args a = packed(kTotalQ, kTotalK, DType::e4m3);
  a.out = TensorView::bshd(fake(kOut), DType::bf16, 1, kTotalQ, kHq, kD);
  AttentionOptions options;
  options.descale = {fake_f32(0x70000000), fake_f32(0x70000040), fake_f32(0x70000080), std::nullopt};
  const AttnProblem p = validate(a, options);
  EXPECT_TRUE(p.fp8_qkv);
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.batch, kBatch);
  EXPECT_EQ(p.dtype, DType::bf16);

  // The factors are [B, Hkv] over the sequences, not over the packed
  // tensors' batch of 1: strides that overflow only past sequence 0 are
  // caught.
  options.descale.strides = std::array<std::int64_t, 2>{std::int64_t{1} << 61, 1};
  expect_invalid(a, {"options.descale.strides", "3 sequences"}, options);

  AttentionOptions missing = options;
  missing.descale = {};
  expect_invalid(a, {"options.descale.q is null"}, missing);
}

// --- the spec and the tune key -------------------------------------------------

TEST(VarlenSpec, JsonHasVarlenOnlyWhenSet) {
  AttnSpec spec{DType::f16, 128, true};
  spec.varlen = true;
  const jit::Json json = spec;
  EXPECT_EQ(json, (jit::Json{{"dtype", "f16"}, {"d", 128}, {"causal", true}, {"varlen", true}}));
  EXPECT_EQ(json.get<AttnSpec>(), spec);

  spec.varlen = false;
  const jit::Json plain = spec;
  EXPECT_FALSE(plain.contains("varlen"));
  EXPECT_EQ(plain.get<AttnSpec>(), spec);
  EXPECT_FALSE(json.get<AttnSpec>() == plain.get<AttnSpec>());
}

TEST(VarlenSpec, SpecOfARaggedProblemIsVarlen) {
  const AttnSpec spec = jit::detail::spec_of(validate(packed(), causal(CausalAlign::BottomRight)));
  EXPECT_TRUE(spec.varlen);
  EXPECT_TRUE(spec.causal);
  EXPECT_EQ(spec.head_dim, kD);
}

TEST(VarlenBucket, AddsThePackedRowsOnlyForARaggedBatch) {
  const AttnProblem ragged = validate(packed());
  const jit::Json bucket = jit::detail::attention_bucket(ragged);
  EXPECT_EQ(bucket["seq_q"], 256);         // the longest sequence, 150
  EXPECT_EQ(bucket["seq_k"], 256);         // 250
  EXPECT_EQ(bucket["batch_heads"], 32);    // 3 sequences x 8 heads = 24
  EXPECT_EQ(bucket["total_q"], 512);       // 300 packed rows
  EXPECT_EQ(bucket.size(), 4u);

  AttnProblem plain = ragged;
  plain.varlen = false;
  EXPECT_FALSE(jit::detail::attention_bucket(plain).contains("total_q"));
}

// The kernels see one batch of packed rows; the sequences come from cu_seqlens.
TEST(VarlenParams, AreOneBatchOfPackedRows) {
  const Args a = packed();
  const AttnProblem problem = validate(a, causal(CausalAlign::BottomRight));
  const cujit::AttnParams p = jit::detail::make_attn_params(problem, a.q, a.k, a.v, a.out, nullptr);
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.seq_q, kTotalQ);
  EXPECT_EQ(p.seq_k, kTotalK);
  EXPECT_EQ(p.group, kHq / kHkv);
  EXPECT_EQ(p.causal_offset, 0);
}

// --- the ragged plan's checks (jit::VarlenAttentionPlan) -------------------------

namespace {

jit::VarlenAttentionPlan plan_for(const Args& a, const AttentionOptions& options = {}) {
  return jit::plan_attention_varlen(a.q, a.k, a.v, a.out, a.batch, options);
}

}  // namespace

TEST(VarlenAttentionPlan, RefusesWhatAttentionVarlenRefusesBeforeTouchingAGpu) {
  Args a = packed();
  a.batch.cu_seqlens_k = nullptr;
  cujit_test::expect_invalid([&] { plan_for(a); }, {"batch.cu_seqlens_k", "null"});
  Args wide = packed();
  wide.batch.max_seqlen_q = kTotalQ + 1;
  cujit_test::expect_invalid([&] { plan_for(wide); }, {"batch.max_seqlen_q"});
}

TEST(VarlenAttentionPlan, AnEmptyPlanSaysHowToMakeOne) {
  const jit::VarlenAttentionPlan plan;
  const Args a = packed();
  cujit_test::expect_invalid([&] { plan.prepare(a.batch); }, {"empty", "jit::plan_attention_varlen"});
  cujit_test::expect_invalid([&] { plan.run(a.q, a.k, a.v, a.out); }, {"empty", "jit::plan_attention_varlen"});
  cujit_test::expect_invalid([&] { (void)plan.workspace_bytes(); }, {"empty"});
}

// A batch with no query rows plans, prepares and runs nothing, on any machine;
// a run with tensors of other shapes is still refused.
TEST(VarlenAttentionPlan, NoQueryRowsPlansNothingButStillChecksRuns) {
  Args none = packed();
  none.batch.max_seqlen_q = 0;
  const jit::VarlenAttentionPlan plan = plan_for(none);
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  plan.prepare(none.batch);
  plan.run(none.q, none.k, none.v, none.out);

  Args more_keys = packed(kTotalQ, kTotalK + 8);
  more_keys.batch.max_seqlen_q = 0;
  cujit_test::expect_invalid([&] { plan.run(more_keys.q, more_keys.k, more_keys.v, more_keys.out); },
                      {"run:", "[1, 2, 508, 128]", "make a plan for them"});
  Args bf16 = none;
  bf16.q.dtype = bf16.k.dtype = bf16.v.dtype = bf16.out.dtype = DType::bf16;
  cujit_test::expect_invalid([&] { plan.run(bf16.q, bf16.k, bf16.v, bf16.out); }, {"element types"});
}
