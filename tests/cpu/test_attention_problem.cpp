// Tests for jit/attention/attention_problem: argument validation, the kernel parameter
// struct and the tune-key bucket. The pointers are fake (never dereferenced),
// so no GPU is needed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "jit/attention/attention_problem.h"
#include "jit/attention/fp8_checks.h"
#include "tests/support/expect_invalid.h"
#include "jit/error.h"
#include "kernel_src/attention/attn_params.h"

namespace {

using jit::AttentionOptions;
using jit::CausalAlign;
using jit::DType;
using jit::ErrorCode;
using jit::TensorView;
using jit::detail::AttnProblem;
using jit::detail::validate_attention;

// The host/device contract: the kernels read this exact layout.
static_assert(sizeof(cujit::AttnParams) == 224, "AttnParams layout changed: update the kernels and this test");

void* fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// Four far-apart, 16-byte-aligned regions (1 MiB apart; the tensors below are smaller).
constexpr std::uintptr_t kQ = 0x10000000, kK = 0x20000000, kV = 0x30000000, kOut = 0x40000000;

struct Tensors {
  TensorView q, k, v, out;
};

// B=2, Hq=Hkv=4, Sq=Sk=128, D=64, contiguous [B, H, S, D].
Tensors valid_bhsd(std::int64_t b = 2, std::int64_t hq = 4, std::int64_t hkv = 4, std::int64_t sq = 128,
                   std::int64_t sk = 128, std::int64_t d = 64, DType dtype = DType::f16) {
  return {TensorView::bhsd(fake(kQ), dtype, b, hq, sq, d), TensorView::bhsd(fake(kK), dtype, b, hkv, sk, d),
          TensorView::bhsd(fake(kV), dtype, b, hkv, sk, d), TensorView::bhsd(fake(kOut), dtype, b, hq, sq, d)};
}

AttnProblem validate(const Tensors& t, const AttentionOptions& options = {}) {
  return validate_attention(t.q, t.k, t.v, t.out, options);
}

using cujit_test::expect_invalid;

void expect_invalid(const Tensors& t, std::initializer_list<std::string> needles, const AttentionOptions& options = {}) {
  expect_invalid([&] { validate(t, options); }, needles);
}

}  // namespace

// --- accepted problems -----------------------------------------------------

// --- FP8 inputs --------------------------------------------------------------

// q, k, v in e4m3 (B=2, Hq=Hkv=4, S=128, D=64), out in `out`.
Tensors valid_fp8(DType out = DType::f16) {
  Tensors t = valid_bhsd(2, 4, 4, 128, 128, 64, DType::e4m3);
  t.out = TensorView::bhsd(fake(kOut), out, 2, 4, 128, 64);
  return t;
}
constexpr std::uintptr_t kDescales = 0x50000000;
AttentionOptions fp8_options() {
  AttentionOptions options;
  options.descale.q = reinterpret_cast<const float*>(kDescales);
  options.descale.k = reinterpret_cast<const float*>(kDescales + 64);
  options.descale.v = reinterpret_cast<const float*>(kDescales + 128);
  return options;
}

TEST(ValidateAttention, AcceptsFp8InputsWithDescalesAndA16BitOutput) {
  for (DType out : {DType::f16, DType::bf16}) {
    const AttnProblem p = validate(valid_fp8(out), fp8_options());
    EXPECT_TRUE(p.fp8_qkv);
    EXPECT_FALSE(p.fp8_kv);
    EXPECT_EQ(p.dtype, out);
    EXPECT_EQ(p.q_dtype(), DType::e4m3);
    EXPECT_EQ(p.kv_dtype(), DType::e4m3);
    const jit::detail::AttnSpec spec = jit::detail::spec_of(p);
    EXPECT_TRUE(spec.fp8_qkv);
    const jit::Json j = spec;
    EXPECT_EQ(j.at("qkv"), "e4m3");
    EXPECT_EQ(j.get<jit::detail::AttnSpec>(), spec);
  }
  AttentionOptions per_tensor = fp8_options();
  per_tensor.descale.strides = std::array<std::int64_t, 2>{0, 0};
  EXPECT_TRUE(validate(valid_fp8(), per_tensor).fp8_qkv);
  // The problem (and so the shape cache's key) tells FP8 from 16-bit inputs.
  EXPECT_NE(validate(valid_fp8(), fp8_options()), validate(valid_bhsd()));
}

TEST(ValidateAttention, RejectsFp8WithoutEachDescale) {
  for (const char* which : {"q", "k", "v"}) {
    AttentionOptions options = fp8_options();
    const float*& factor = which[0] == 'q' ? options.descale.q : which[0] == 'k' ? options.descale.k : options.descale.v;
    factor = nullptr;
    expect_invalid(valid_fp8(), {fmt::format("options.descale.{} is null", which), "[B, Hkv]"}, options);
    factor = reinterpret_cast<const float*>(kDescales + 2);
    expect_invalid(valid_fp8(), {fmt::format("options.descale.{} must be 4-byte aligned", which)}, options);
  }
  // An empty problem reads no factor.
  Tensors empty = valid_fp8();
  empty.q.shape[2] = empty.out.shape[2] = 0;
  EXPECT_NO_THROW(validate(empty));
}

TEST(ValidateAttention, RejectsBadFp8DescaleStrides) {
  AttentionOptions options = fp8_options();
  options.descale.strides = std::array<std::int64_t, 2>{-1, 1};
  expect_invalid(valid_fp8(), {"options.descale.strides", "negative"}, options);
  options.descale.strides = std::array<std::int64_t, 2>{std::int64_t{1} << 62, 1};
  expect_invalid(valid_fp8(), {"options.descale.strides", "64-bit"}, options);
}

TEST(ValidateAttention, RejectsDescalesOn16BitInputs) {
  AttentionOptions options;
  options.descale.k = reinterpret_cast<const float*>(kDescales);
  expect_invalid(valid_bhsd(), {"options.descale.k is set", "FP8"}, options);
  AttentionOptions strides_only;
  strides_only.descale.strides = std::array<std::int64_t, 2>{0, 0};
  expect_invalid(valid_bhsd(), {"options.descale.strides is set"}, strides_only);
}

TEST(ValidateAttention, RejectsMixedFp8And16BitTensors) {
  Tensors k16 = valid_fp8();
  k16.k = TensorView::bhsd(fake(kK), DType::f16, 2, 4, 128, 64);
  expect_invalid(k16, {"dtype", "k f16"}, fp8_options());
  Tensors out8 = valid_fp8();
  out8.out.dtype = DType::e4m3;
  expect_invalid(out8, {"out f16 or bf16", "out e4m3"}, fp8_options());
  // An FP8 K/V with 16-bit q is the KV-cache API's.
  Tensors cache_like = valid_fp8();
  cache_like.q = TensorView::bhsd(fake(kQ), DType::f16, 2, 4, 128, 64);
  expect_invalid(cache_like, {"attention_with_kvcache"}, fp8_options());
  // e5m2 is a cache format: as K/V under 16-bit q it points there too; as q it is refused by name.
  Tensors e5m2_cache = cache_like;
  e5m2_cache.k.dtype = e5m2_cache.v.dtype = DType::e5m2;
  expect_invalid(e5m2_cache, {"k e5m2", "An e5m2 K/V cache", "attention_with_kvcache"}, fp8_options());
  Tensors e5m2_inputs = valid_fp8();
  e5m2_inputs.q.dtype = e5m2_inputs.k.dtype = e5m2_inputs.v.dtype = DType::e5m2;
  expect_invalid(e5m2_inputs, {"q e5m2", "e5m2 is taken for KV caches"}, fp8_options());
  Tensors out_e5m2 = valid_fp8();
  out_e5m2.out.dtype = DType::e5m2;
  expect_invalid(out_e5m2, {"out e5m2"}, fp8_options());
}

// 16 bytes of e4m3 are 16 elements: a row stride of 8 would misalign every
// other row's 16-byte loads.
TEST(ValidateAttention, RejectsFp8StridesNotMultipleOf16Bytes) {
  Tensors t = valid_fp8();
  t.q.strides = {4 * 128 * 72, 128 * 72, 72, 1};
  t.q.shape[3] = 64;
  expect_invalid(t, {"q's stride 72", "multiple of 16 elements"}, fp8_options());
}

TEST(Fp8Target, SaysWhichGpusAndHeadDimsFp8AttentionNeeds) {
  AttnProblem p = validate(valid_fp8(), fp8_options());
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_89")));
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_90a")));
  auto expect_unsupported = [](const AttnProblem& problem, const char* arch, std::initializer_list<std::string> needles) {
    try {
      jit::detail::check_fp8_target(problem, jit::offline_target(arch));
      ADD_FAILURE() << "expected Unsupported on " << arch;
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      for (const std::string& needle : needles) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    }
  };
  expect_unsupported(p, "sm_80", {"FP8 (e4m3) attention", "sm_89 or newer", "sm_80", "f16 or bf16 q, k and v"});
  p.head_dim = 256;  // the sm90 family's alone
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_90a")));
  expect_unsupported(p, "sm_89", {"head dim 64 or 128 (or 256 on sm_90a), not 256"});
  p.head_dim = 96;
  expect_unsupported(p, "sm_90a", {"head dim 64 or 128 (or 256 on sm_90a), not 96"});
  p.head_dim = 256;
  p.fp8_qkv = false;
  p.fp8_kv = true;
  expect_unsupported(p, "sm_90a", {"FP8 (e4m3) KV cache", "f16 or bf16 cache"});
  p.head_dim = 128;
  expect_unsupported(p, "sm_80", {"FP8 (e4m3) KV cache", "sm_89 or newer"});
  // An e5m2 cache is an f16's upper bytes: no FP8 hardware needed.
  p.fp8_format = DType::e5m2;
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_80")));
  p.head_dim = 256;
  expect_unsupported(p, "sm_90a", {"FP8 (e5m2) KV cache", "head dim 64 or 128",
                                   "or 256 with at most 8 query rows per KV head", "not 256 with 128 query rows"});
  // At D = 256 a cache of query rows 4 heads x 2 new rows per KV head is served.
  p.heads_q = 16;
  p.seq_q = 2;
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_80")));
  p.fp8_format = DType::e4m3;
  EXPECT_NO_THROW(jit::detail::check_fp8_target(p, jit::offline_target("sm_89")));
  p.seq_q = 3;
  expect_unsupported(p, "sm_90a", {"FP8 (e4m3) KV cache", "not 256 with 12 query rows per KV head"});
}

TEST(E5m2Bits, RoundTripEveryCodeAndRoundToNearestEven) {
  for (std::uint16_t code = 0; code < 256; ++code) {
    const float value = jit::bits_to_float(code, DType::e5m2);
    // The upper byte of an f16, exactly.
    const float as_f16 = jit::bits_to_float(std::uint16_t(code << 8), DType::f16);
    if ((code & 0x7f) > 0x7c) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    EXPECT_EQ(value, as_f16) << code;
    EXPECT_EQ(jit::float_to_bits(value, DType::e5m2), code) << code << " = " << value;
  }
  EXPECT_EQ(jit::bits_to_float(0x7b, DType::e5m2), 57344.f);
  EXPECT_EQ(jit::bits_to_float(0x01, DType::e5m2), std::ldexp(1.f, -16));
  EXPECT_EQ(jit::float_to_bits(60000.f, DType::e5m2), 0x7b);  // under the midpoint of 57344 and 65536
  EXPECT_EQ(jit::float_to_bits(61440.f, DType::e5m2), 0x7c);  // the midpoint: to even, infinity
  EXPECT_EQ(jit::float_to_bits(-1e6f, DType::e5m2), 0xfc);
  EXPECT_EQ(jit::float_to_bits(1.125f, DType::e5m2), 0x3c);   // halfway between 1 and 1.25: to even (1)
  EXPECT_EQ(jit::float_to_bits(1.375f, DType::e5m2), 0x3e);   // halfway between 1.25 and 1.5: to even (1.5)
  EXPECT_EQ(jit::float_to_bits(std::ldexp(1.f, -17), DType::e5m2), 0x00);  // half the smallest step: to even (0)
  EXPECT_TRUE(std::isnan(jit::bits_to_float(jit::float_to_bits(std::nanf(""), DType::e5m2), DType::e5m2)));
  EXPECT_EQ(jit::element_size(DType::e5m2), 1u);
  EXPECT_STREQ(jit::to_string(DType::e5m2), "e5m2");
}

TEST(E4m3Bits, RoundTripEveryCodeAndRoundToNearestEven) {
  for (std::uint16_t code = 0; code < 256; ++code) {
    const float value = jit::bits_to_float(code, DType::e4m3);
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    EXPECT_EQ(jit::float_to_bits(value, DType::e4m3), code) << code << " = " << value;
  }
  EXPECT_EQ(jit::bits_to_float(0x7e, DType::e4m3), 448.f);
  EXPECT_EQ(jit::bits_to_float(0x01, DType::e4m3), std::ldexp(1.f, -9));
  EXPECT_EQ(jit::bits_to_float(0x08, DType::e4m3), std::ldexp(1.f, -6));
  EXPECT_EQ(jit::float_to_bits(1000.f, DType::e4m3), 0x7e);   // saturates
  EXPECT_EQ(jit::float_to_bits(-1000.f, DType::e4m3), 0xfe);
  EXPECT_EQ(jit::float_to_bits(1.0625f, DType::e4m3), 0x38);  // halfway between 1 and 1.125: to even (1)
  EXPECT_EQ(jit::float_to_bits(1.1875f, DType::e4m3), 0x3a);  // between 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(jit::float_to_bits(std::ldexp(1.f, -10), DType::e4m3), 0x00);  // half the smallest step: to even (0)
  EXPECT_EQ(jit::element_size(DType::e4m3), 1u);
  EXPECT_STREQ(jit::to_string(DType::e4m3), "e4m3");
}

TEST(ValidateAttention, AcceptsContiguousBhsd) {
  const AttnProblem p = validate(valid_bhsd());
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 4);
  EXPECT_EQ(p.heads_kv, 4);
  EXPECT_EQ(p.seq_q, 128);
  EXPECT_EQ(p.seq_k, 128);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.dtype, DType::f16);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.causal_offset, 0);
  EXPECT_FALSE(p.empty());
}

TEST(ValidateAttention, AcceptsBshdLayout) {
  // [B, S, H, D] storage viewed as [B, H, S, D]: strides are permuted.
  const Tensors t{TensorView::bshd(fake(kQ), DType::bf16, 2, 100, 4, 128),
                  TensorView::bshd(fake(kK), DType::bf16, 2, 300, 4, 128),
                  TensorView::bshd(fake(kV), DType::bf16, 2, 300, 4, 128),
                  TensorView::bshd(fake(kOut), DType::bf16, 2, 100, 4, 128)};
  EXPECT_EQ(t.q.shape, (std::array<std::int64_t, 4>{2, 4, 100, 128}));
  EXPECT_EQ(t.q.strides, (std::array<std::int64_t, 4>{100 * 4 * 128, 128, 4 * 128, 1}));
  const AttnProblem p = validate(t);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 4);
  EXPECT_EQ(p.seq_q, 100);
  EXPECT_EQ(p.seq_k, 300);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.dtype, DType::bf16);
}

TEST(ValidateAttention, AcceptsGroupedQueryAttention) {
  const AttnProblem p = validate(valid_bhsd(1, 8, 2));
  EXPECT_EQ(p.heads_q, 8);
  EXPECT_EQ(p.heads_kv, 2);
  // MQA too.
  EXPECT_EQ(validate(valid_bhsd(1, 8, 1)).heads_kv, 1);
}

TEST(ValidateAttention, AcceptsEmptyBatchWithNullPointers) {
  const Tensors t{TensorView::bhsd(nullptr, DType::f16, 0, 4, 128, 64),
                  TensorView::bhsd(nullptr, DType::f16, 0, 4, 128, 64),
                  TensorView::bhsd(nullptr, DType::f16, 0, 4, 128, 64),
                  TensorView::bhsd(nullptr, DType::f16, 0, 4, 128, 64)};
  const AttnProblem p = validate(t);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.batch, 0);
}

TEST(ValidateAttention, AcceptsEmptyQueryWithNullPointers) {
  {
    // Sq = Sk = 0: every tensor is empty, every pointer null.
    const Tensors t{TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64),
                    TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64),
                    TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64),
                    TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64)};
    EXPECT_TRUE(validate(t).empty());
  }
  {
    // Sq = 0 with real keys: q and out are empty and null.
    const Tensors t{TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64),
                    TensorView::bhsd(fake(kK), DType::f16, 2, 4, 256, 64),
                    TensorView::bhsd(fake(kV), DType::f16, 2, 4, 256, 64),
                    TensorView::bhsd(nullptr, DType::f16, 2, 4, 0, 64)};
    const AttnProblem p = validate(t);
    EXPECT_TRUE(p.empty());
    EXPECT_EQ(p.seq_q, 0);
    EXPECT_EQ(p.seq_k, 256);
  }
}

// --- rejected problems: InvalidArgument naming the argument ------------------

TEST(ValidateAttention, RejectsNullPointers) {
  {
    Tensors t = valid_bhsd();
    t.q.data = nullptr;
    expect_invalid(t, {"q is a null pointer"});
  }
  {
    Tensors t = valid_bhsd();
    t.k.data = nullptr;
    expect_invalid(t, {"k is a null pointer"});
  }
  {
    Tensors t = valid_bhsd();
    t.v.data = nullptr;
    expect_invalid(t, {"v is a null pointer"});
  }
  {
    Tensors t = valid_bhsd();
    t.out.data = nullptr;
    expect_invalid(t, {"out is a null pointer"});
  }
}

TEST(ValidateAttention, RejectsKeyValueShapeMismatch) {
  Tensors t = valid_bhsd();
  t.v = TensorView::bhsd(fake(kV), DType::f16, 2, 4, 64, 64);  // Sk 64 vs k's 128
  expect_invalid(t, {"k and v", "same shape"});
}

TEST(ValidateAttention, RejectsBatchMismatch) {
  Tensors t = valid_bhsd();
  t.k = TensorView::bhsd(fake(kK), DType::f16, 3, 4, 128, 64);
  t.v = TensorView::bhsd(fake(kV), DType::f16, 3, 4, 128, 64);
  expect_invalid(t, {"q and k", "batch"});
}

TEST(ValidateAttention, RejectsHeadDimMismatch) {
  Tensors t = valid_bhsd();
  t.k = TensorView::bhsd(fake(kK), DType::f16, 2, 4, 128, 128);
  t.v = TensorView::bhsd(fake(kV), DType::f16, 2, 4, 128, 128);
  expect_invalid(t, {"q and k", "head dim"});
}

TEST(ValidateAttention, RejectsQueryHeadsNotMultipleOfKeyHeads) {
  expect_invalid(valid_bhsd(1, 6, 4), {"heads", "multiple"});
  expect_invalid(valid_bhsd(1, 2, 4), {"heads", "multiple"});
}

TEST(ValidateAttention, RejectsOutputShapeMismatch) {
  Tensors t = valid_bhsd();
  t.out = TensorView::bhsd(fake(kOut), DType::f16, 2, 4, 64, 64);
  expect_invalid(t, {"out", "shape"});
}

TEST(ValidateAttention, RejectsDtypeMismatch) {
  {
    Tensors t = valid_bhsd();
    t.k.dtype = DType::bf16;
    expect_invalid(t, {"dtype"});
  }
  {
    Tensors t = valid_bhsd();
    t.out.dtype = DType::bf16;
    expect_invalid(t, {"dtype", "out bf16"});
  }
}

TEST(ValidateAttention, RejectsNonContiguousLastDimension) {
  Tensors t = valid_bhsd();
  t.q.strides[3] = 2;
  expect_invalid(t, {"q's last dimension", "contiguous"});
  Tensors u = valid_bhsd();
  u.v.strides[3] = 0;
  expect_invalid(u, {"v's last dimension", "contiguous"});
}

TEST(ValidateAttention, RejectsMisalignedPointer) {
  for (std::uintptr_t offset : {2u, 8u, 14u}) {
    Tensors t = valid_bhsd();
    t.q.data = fake(kQ + offset);
    expect_invalid(t, {"q must be 16-byte aligned"});
  }
  Tensors t = valid_bhsd();
  t.k.data = fake(kK + 8);
  expect_invalid(t, {"k must be 16-byte aligned"});
}

TEST(ValidateAttention, RejectsRowStrideNotMultipleOfEight) {
  // A padded row of 68 elements: the head and batch strides stay multiples of 8.
  Tensors t = valid_bhsd();
  t.q.strides = {4 * 128 * 68, 128 * 68, 68, 1};
  expect_invalid(t, {"q's stride 68", "dimension 2", "multiple of 8"});
  Tensors u = valid_bhsd();
  u.out.strides = {4 * 128 * 64 + 4, 128 * 64, 64, 1};  // batch stride off by 4
  expect_invalid(u, {"out's stride", "dimension 0"});
}

TEST(ValidateAttention, RejectsOutputOverlappingQuery) {
  Tensors t = valid_bhsd();
  t.out.data = t.q.data;
  expect_invalid(t, {"out overlaps"});
  // A partial overlap: out starts inside q's last row.
  const std::int64_t q_bytes = t.q.numel() * 2;
  t.out.data = fake(kQ + std::uintptr_t(q_bytes) - 64);
  expect_invalid(t, {"out overlaps"});
  // Adjacent (out starts right after q ends) is fine.
  t.out.data = fake(kQ + std::uintptr_t(q_bytes));
  EXPECT_NO_THROW(validate(t));
}

TEST(ValidateAttention, RejectsOutputWhoseElementsShareAddresses) {
  Tensors t = valid_bhsd();
  t.out.strides[1] = 0;  // every head writes the same memory
  expect_invalid(t, {"out's strides", "race"});
  t = valid_bhsd();
  t.out.strides[2] = 32;  // rows of 64 elements, 32 apart
  expect_invalid(t, {"out's strides"});
  // Inputs may broadcast (stride 0): only the output is written.
  t = valid_bhsd();
  t.k.strides[1] = t.v.strides[1] = 0;
  EXPECT_NO_THROW(validate(t));
  // A dimension of extent 1 may have any stride; BSHD is not an overlap.
  t = valid_bhsd(2, 1, 1);
  t.out.strides[1] = 0;
  EXPECT_NO_THROW(validate(t));
  t = valid_bhsd();
  t.out = TensorView::bshd(fake(kOut), DType::f16, 2, 128, 4, 64);
  EXPECT_NO_THROW(validate(t));
}

TEST(ValidateAttention, RejectsBadScale) {
  for (float scale : {-0.125f, 0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
    AttentionOptions options;
    options.scale = scale;
    expect_invalid(valid_bhsd(), {"scale"}, options);
  }
}

TEST(ValidateAttention, RejectsNegativeSizes) {
  {
    Tensors t = valid_bhsd();
    t.q.shape[2] = -1;
    expect_invalid(t, {"q has a negative size", "dimension 2"});
  }
  {
    Tensors t = valid_bhsd();
    t.k.shape[0] = -2;
    t.v.shape[0] = -2;
    expect_invalid(t, {"k has a negative size"});
  }
  {
    Tensors t = valid_bhsd();
    t.out.strides[1] = -8;
    expect_invalid(t, {"out has a negative stride"});
  }
}

// [32768, 32768, 2^28, 64]: 2^64 elements, which a wrapping count made 0, so
// the view passed as empty whatever its pointer, strides and alignment.
TEST(ValidateAttention, RejectsAShapeWhoseElementCountOverflowsNamingTheTensor) {
  const TensorView huge{nullptr, DType::f16, {32768, 32768, std::int64_t{1} << 28, 64}, {0, 0, 0, 0}};
  for (const char* name : {"q", "k", "v", "out"}) {
    Tensors t = valid_bhsd();
    TensorView& view = name[0] == 'q' ? t.q : name[0] == 'k' ? t.k : name[0] == 'v' ? t.v : t.out;
    view = huge;  // each view is checked on its own before any is compared with another
    expect_invalid(t, {std::string(name) + "'s shape [32768, 32768, 268435456, 64]", "more elements"});
  }
  // Odd strides and a misaligned pointer on the same shape: still the count.
  Tensors t = valid_bhsd();
  t.q = TensorView{fake(kQ + 3), DType::f16, {32768, 32768, std::int64_t{1} << 28, 64}, {7, 5, 3, 1}};
  expect_invalid(t, {"q's shape", "more elements"});
  EXPECT_THROW((void)t.q.numel(), jit::Error);
  EXPECT_EQ((TensorView{nullptr, DType::f16, {0, INT64_MAX, INT64_MAX, 64}, {}}.numel()), 0);
}

TEST(ValidateAttention, RejectsStridesWhoseByteExtentOverflows) {
  Tensors t = valid_bhsd();
  t.out.strides[0] = std::numeric_limits<std::int64_t>::max() - 7;  // a multiple of 8 that overflows the byte count
  expect_invalid(t, {"out's shape [2, 4, 128, 64] and strides", "address space"});
  t = valid_bhsd();
  // Each stride fits; the last element's offset, 2^62 + 3 x 2^62, does not.
  t.k.strides[0] = t.k.strides[1] = t.v.strides[0] = t.v.strides[1] = std::int64_t{1} << 62;
  expect_invalid(t, {"k's shape", "address space"});
  // The end of the address space: the extent itself fits, the address does not.
  t = valid_bhsd(1, 1, 1, 1, 1, 64);
  t.q.data = fake(std::numeric_limits<std::uintptr_t>::max() - 15);
  expect_invalid(t, {"q's shape [1, 1, 1, 64]", "address space"});
}

TEST(TensorView, ContiguousFactoriesRefuseStridesThatOverflow) {
  EXPECT_THROW((void)TensorView::bhsd(fake(kQ), DType::f16, 1, 32768, std::int64_t{1} << 40, 1 << 20), jit::Error);
  EXPECT_THROW((void)TensorView::bshd(fake(kQ), DType::f16, 1, std::int64_t{1} << 40, 32768, 1 << 20), jit::Error);
  EXPECT_EQ(TensorView::bhsd(fake(kQ), DType::f16, 2, 4, 128, 64).strides[0], 4 * 128 * 64);
}

// --- derived fields ------------------------------------------------------------

TEST(ValidateAttention, CausalOffsets) {
  AttentionOptions options;
  options.causal = true;
  options.align = CausalAlign::TopLeft;
  EXPECT_EQ(validate(valid_bhsd(1, 4, 4, 128, 384), options).causal_offset, 0);
  EXPECT_EQ(validate(valid_bhsd(1, 4, 4, 384, 128), options).causal_offset, 0);

  options.align = CausalAlign::BottomRight;
  const AttnProblem p = validate(valid_bhsd(1, 4, 4, 128, 384), options);
  EXPECT_TRUE(p.causal);
  EXPECT_EQ(p.causal_offset, 384 - 128);
  EXPECT_EQ(validate(valid_bhsd(1, 4, 4, 384, 128), options).causal_offset, 128 - 384);
  EXPECT_EQ(validate(valid_bhsd(1, 4, 4, 200, 200), options).causal_offset, 0);

  // Alignment means nothing without causal.
  AttentionOptions plain;
  plain.align = CausalAlign::BottomRight;
  const AttnProblem q = validate(valid_bhsd(1, 4, 4, 128, 384), plain);
  EXPECT_FALSE(q.causal);
  EXPECT_EQ(q.causal_offset, 0);
}

TEST(ValidateAttention, DefaultScaleIsInverseSqrtHeadDim) {
  EXPECT_FLOAT_EQ(validate(valid_bhsd(1, 4, 4, 128, 128, 64)).scale, 0.125f);
  EXPECT_FLOAT_EQ(validate(valid_bhsd(1, 4, 4, 128, 128, 128)).scale, float(1.0 / std::sqrt(128.0)));
  AttentionOptions options;
  options.scale = 0.5f;
  EXPECT_FLOAT_EQ(validate(valid_bhsd(), options).scale, 0.5f);
}

TEST(MakeAttnParams, CopiesStridesSizesAndDerivedFields) {
  const Tensors t{TensorView::bshd(fake(kQ), DType::f16, 3, 100, 8, 64),
                  TensorView::bshd(fake(kK), DType::f16, 3, 300, 2, 64),
                  TensorView::bshd(fake(kV), DType::f16, 3, 300, 2, 64),
                  TensorView::bhsd(fake(kOut), DType::f16, 3, 8, 100, 64)};
  AttentionOptions options;
  options.causal = true;
  options.align = CausalAlign::BottomRight;
  options.scale = 0.3f;
  const AttnProblem problem = validate(t, options);
  float* lse = reinterpret_cast<float*>(fake(0x50000000));
  const cujit::AttnParams p = jit::detail::make_attn_params(problem, t.q, t.k, t.v, t.out, lse);

  EXPECT_EQ(p.q, t.q.data);
  EXPECT_EQ(p.k, t.k.data);
  EXPECT_EQ(p.v, t.v.data);
  EXPECT_EQ(p.o, t.out.data);
  EXPECT_EQ(p.lse, lse);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.q_stride[i], t.q.strides[i]) << i;
    EXPECT_EQ(p.k_stride[i], t.k.strides[i]) << i;
    EXPECT_EQ(p.v_stride[i], t.v.strides[i]) << i;
    EXPECT_EQ(p.o_stride[i], t.out.strides[i]) << i;
  }
  // bshd: row stride is H*D, head stride is D.
  EXPECT_EQ(p.q_stride[0], 100 * 8 * 64);
  EXPECT_EQ(p.q_stride[1], 64);
  EXPECT_EQ(p.q_stride[2], 8 * 64);
  EXPECT_EQ(p.k_stride[2], 2 * 64);
  EXPECT_EQ(p.o_stride[2], 64);

  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.heads_q, 8);
  EXPECT_EQ(p.heads_kv, 2);
  EXPECT_EQ(p.seq_q, 100);
  EXPECT_EQ(p.seq_k, 300);
  EXPECT_EQ(p.group, 4);
  EXPECT_EQ(p.causal_offset, 200);
  EXPECT_FLOAT_EQ(p.scale_log2, 0.3f * 1.4426950408889634f);
  EXPECT_NEAR(p.scale_log2, 0.3 / std::log(2.0), 1e-6);
}

TEST(MakeAttnParams, NullLseAndDefaultScale) {
  const Tensors t = valid_bhsd(2, 8, 8, 128, 128, 128);
  const AttnProblem problem = validate(t);
  const cujit::AttnParams p = jit::detail::make_attn_params(problem, t.q, t.k, t.v, t.out, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.group, 1);
  EXPECT_EQ(p.causal_offset, 0);
  EXPECT_NEAR(p.scale_log2, (1.0 / std::sqrt(128.0)) * 1.4426950408889634, 1e-6);
}

TEST(AttentionBucket, RoundsUpToPowersOfTwoWithFloors) {
  auto bucket = [](std::int64_t b, std::int64_t hq, std::int64_t sq, std::int64_t sk) {
    AttnProblem p;
    p.batch = b;
    p.heads_q = hq;
    p.heads_kv = hq;
    p.seq_q = sq;
    p.seq_k = sk;
    p.head_dim = 64;
    return jit::detail::attention_bucket(p);
  };
  const jit::Json a = bucket(1, 1, 1, 1);
  EXPECT_EQ(a["seq_q"], 64);  // floor 64
  EXPECT_EQ(a["seq_k"], 64);
  EXPECT_EQ(a["batch_heads"], 1);  // floor 1

  const jit::Json b = bucket(3, 5, 65, 1000);
  EXPECT_EQ(b["seq_q"], 128);
  EXPECT_EQ(b["seq_k"], 1024);
  EXPECT_EQ(b["batch_heads"], 16);  // 15 -> 16

  const jit::Json c = bucket(2, 16, 1024, 4097);
  EXPECT_EQ(c["seq_q"], 1024);  // already a power of two
  EXPECT_EQ(c["seq_k"], 8192);
  EXPECT_EQ(c["batch_heads"], 32);

  EXPECT_EQ(bucket(1, 1, 64, 63)["seq_k"], 64);
  EXPECT_EQ(bucket(1, 1, 64, 129)["seq_k"], 256);
  EXPECT_EQ(bucket(0, 0, 0, 0)["batch_heads"], 1);
  EXPECT_EQ(bucket(0, 0, 0, 0)["seq_q"], 64);

  // Exactly these three fields: they form the tune key.
  EXPECT_EQ(a.size(), 3u);
}
