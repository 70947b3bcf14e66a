// Inputs at the edges: NaN and infinities in q, k and v (they must propagate
// as they do in the float64 reference), tensors of more than 2^31 elements
// (offsets must not wrap), and pointers the kernel's GPU cannot use.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_check.h"
#include "gpu_test_support.h"
#include "jit/attention.h"
#include "jit/error.h"

namespace cujit_test {
namespace {

using jit::DType;

class SpecialInputs : public ::testing::Test {
 protected:
  void SetUp() override { CUJIT_REQUIRE_GPU(); }
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// O and LSE against a reference with non-finite values: where the reference
// is NaN the result must be NaN, where it is +-inf the same infinity, and the
// finite elements must meet the usual error bound.
void expect_matches_with_non_finite(const std::vector<float>& got_o, const std::vector<float>& got_lse,
                                    const ReferenceResult& ref) {
  std::vector<float> got_finite;
  std::vector<double> ref_finite;
  std::int64_t mismatched = 0, nan_elements = 0;
  std::string first;
  for (std::size_t i = 0; i < ref.o.size(); ++i) {
    const double want = ref.o[i];
    const float have = got_o[i];
    if (std::isfinite(want)) {
      got_finite.push_back(have);
      ref_finite.push_back(want);
      continue;
    }
    nan_elements += std::isnan(want);
    const bool ok = std::isnan(want) ? std::isnan(have) : double(have) == want;
    if (!ok && mismatched++ == 0) first = fmt::format("element {}: got {}, want {}", i, have, want);
  }
  EXPECT_EQ(mismatched, 0) << mismatched << " non-finite reference elements differ (first: " << first << ")";
  ASSERT_GT(nan_elements, 0) << "the case injects NaN/inf but the reference has no NaN: the test checks nothing";
  ASSERT_GT(ref_finite.size(), 0u);
  const ErrorReport report = compare(got_finite, ref_finite);
  EXPECT_EQ(report.non_finite, 0) << "NaN/inf where the reference is finite: " << report.describe();
  EXPECT_LT(report.rel_l2, kRelL2Tolerance) << report.describe();

  std::int64_t lse_bad = 0;
  for (std::size_t i = 0; i < ref.lse.size(); ++i) {
    const double want = ref.lse[i];
    const double have = got_lse[i];
    const bool ok = std::isnan(want)   ? std::isnan(have)
                    : std::isinf(want) ? have == want
                                       : std::abs(have - want) <= kLseTolerance * std::max(1.0, std::abs(want));
    if (!ok && lse_bad++ == 0) ADD_FAILURE() << "LSE row " << i << ": got " << have << ", want " << want;
  }
  EXPECT_EQ(lse_bad, 0) << "LSE rows differing from the reference";
}

// One value of a [B, H, S, D] host array, set in logical order.
void set(std::vector<float>& values, const Dims4& dims, Dims4 at, float value) {
  values[logical_index(dims, at[0], at[1], at[2], at[3])] = value;
}

// Semantics (docs/reliability.md): scores are reduced with a max that skips
// NaN, as the reference's std::max does; a NaN or +inf score makes its row NaN
// (exp(inf - inf)); a -inf score drops its key. A NaN in v reaches column d of
// every row that sees its key. (Causal rows that cannot see that key may get
// it too when they share a key block, since the masked weight is 0 and
// 0 * NaN = NaN; the v injection below is at a key every row sees.)
TEST_F(SpecialInputs, NanAndInfinityPropagateAsInTheReference) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::int64_t d : {64, 128}) {
      for (Mask mask : {Mask::none, Mask::bottom_right}) {
        AttnCase c;
        c.dtype = dtype;
        c.batch = 1;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seq_q = 200;
        c.seq_k = 300;  // bottom-right: row 0 sees keys 0..100
        c.head_dim = d;
        c.mask = mask;
        SCOPED_TRACE(case_name(c));
        const Dims4 q_dims{c.batch, c.heads_q, c.seq_q, d};
        const Dims4 kv_dims{c.batch, c.heads_kv, c.seq_k, d};
        std::vector<float> q = rng.normal_vector(std::size_t(count(q_dims)), dtype);
        std::vector<float> k = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
        std::vector<float> v = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
        set(q, q_dims, {0, 1, 37, 5}, kNaN);     // one row of head 1
        set(q, q_dims, {0, 3, 150, 10}, -kInf);  // one row of head 3: +inf scores wherever k < 0
        set(k, kv_dims, {0, 0, 150, 3}, kNaN);   // key 150 of heads 0 and 1: causal rows before it stay finite
        set(k, kv_dims, {0, 1, 20, 7}, kInf);    // key 20 of heads 2, 3: NaN rows where q > 0, dropped where q < 0
        set(v, kv_dims, {0, 1, 50, 9}, kNaN);    // column 9 of every row of heads 2 and 3
        TestTensor dq = make_tensor(Layout::bhsd, dtype, q_dims, &q);
        TestTensor dk = make_tensor(Layout::bhsd, dtype, kv_dims, &k);
        TestTensor dv = make_tensor(Layout::bhsd, dtype, kv_dims, &v);
        TestTensor out = make_tensor(Layout::bhsd, dtype, q_dims);
        jit::DeviceBuffer lse(std::size_t(c.batch * c.heads_q * c.seq_q) * sizeof(float));
        poison(lse.data(), lse.size());
        jit::attention(dq.view, dk.view, dv.view, out.view, options_for(c, static_cast<float*>(lse.data())));
        synchronize();
        const ReferenceResult ref = reference_attention(reference_problem(c), q, k, v);
        expect_matches_with_non_finite(gather_logical(download_storage(out), out.view),
                                       download_f32(lse.data(), ref.lse.size()), ref);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Inputs broadcast with a stride of 0: one Q for the whole batch, one K/V head
// for all KV heads. Every index of that dimension reads the same memory.

// `values` ([1 or n] along `dim`) repeated n times along dim, in logical order.
std::vector<float> repeat_along(const std::vector<float>& values, Dims4 dims, int dim, std::int64_t n) {
  Dims4 full = dims;
  full[std::size_t(dim)] = n;
  std::vector<float> out(std::size_t(count(full)));
  for (std::int64_t b = 0; b < full[0]; ++b)
    for (std::int64_t h = 0; h < full[1]; ++h)
      for (std::int64_t s = 0; s < full[2]; ++s)
        for (std::int64_t d = 0; d < full[3]; ++d) {
          Dims4 from{b, h, s, d};
          from[std::size_t(dim)] = 0;
          out[logical_index(full, b, h, s, d)] = values[logical_index(dims, from[0], from[1], from[2], from[3])];
        }
  return out;
}

TEST_F(SpecialInputs, StrideZeroBroadcastInputs) {
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::int64_t d : {64, 128}) {
      AttnCase c;
      c.dtype = dtype;
      c.batch = 2;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.seq_q = 100;
      c.seq_k = 300;
      c.head_dim = d;
      c.mask = Mask::bottom_right;
      SCOPED_TRACE(case_name(c));
      const Dims4 q_one{1, c.heads_q, c.seq_q, d};      // broadcast over the batch
      const Dims4 kv_one{c.batch, 1, c.seq_k, d};       // broadcast over KV heads
      const std::vector<float> q1 = rng.normal_vector(std::size_t(count(q_one)), dtype);
      const std::vector<float> k1 = rng.normal_vector(std::size_t(count(kv_one)), dtype);
      const std::vector<float> v1 = rng.normal_vector(std::size_t(count(kv_one)), dtype);
      TestTensor dq = make_tensor(Layout::bhsd, dtype, q_one, &q1);
      TestTensor dk = make_tensor(Layout::bhsd, dtype, kv_one, &k1);
      TestTensor dv = make_tensor(Layout::bhsd, dtype, kv_one, &v1);
      jit::TensorView q = dq.view, k = dk.view, v = dv.view;
      q.shape[0] = c.batch;
      q.strides[0] = 0;
      k.shape[1] = v.shape[1] = c.heads_kv;
      k.strides[1] = v.strides[1] = 0;
      const Dims4 o_dims{c.batch, c.heads_q, c.seq_q, d};
      TestTensor out = make_tensor(Layout::bhsd, dtype, o_dims);
      jit::attention(q, k, v, out.view, options_for(c, nullptr));
      synchronize();
      const ReferenceProblem p = reference_problem(c);
      const ReferenceResult ref = reference_attention(p, repeat_along(q1, q_one, 0, c.batch),
                                                      repeat_along(k1, kv_one, 1, c.heads_kv),
                                                      repeat_along(v1, kv_one, 1, c.heads_kv));
      expect_output_matches(gather_logical(download_storage(out), out.view), ref, p);
    }
  }
}

// ---------------------------------------------------------------------------
// More than 2^31 elements per tensor: 32-bit element offsets would wrap at the
// heads past 2^31. The tensors are filled with a repeating random pattern
// (copied, not generated, so the fill takes a second), whose period is not a
// multiple of a head, so every head differs; heads on either side of 2^31 and
// the last one are checked against the reference.

struct PatternTensor {
  std::vector<float> pattern;  // values as the dtype holds them
  jit::DeviceBuffer buffer;
};

PatternTensor pattern_tensor(DType dtype, std::int64_t elements, TestRng& rng) {
  constexpr std::int64_t kPeriod = (std::int64_t{1} << 24) + 8 * 37;
  PatternTensor t;
  t.pattern = rng.normal_vector(std::size_t(kPeriod), dtype);
  std::vector<std::uint16_t> bits(t.pattern.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = encode(dtype, t.pattern[i]);
  t.buffer = jit::DeviceBuffer(std::size_t(elements) * 2);
  for (std::int64_t at = 0; at < elements; at += kPeriod) {
    const std::int64_t n = std::min(kPeriod, elements - at);
    copy_to_device(static_cast<std::uint16_t*>(t.buffer.data()) + at, bits.data(), std::size_t(n) * 2);
  }
  return t;
}

std::vector<float> pattern_slice(const PatternTensor& t, std::int64_t first, std::int64_t n) {
  const auto period = std::int64_t(t.pattern.size());
  std::vector<float> values;
  values.reserve(std::size_t(n));
  for (std::int64_t i = 0; i < n; ++i) values.push_back(t.pattern[std::size_t((first + i) % period)]);
  return values;
}

TEST_F(SpecialInputs, TensorsOfMoreThan2To31ElementsAreIndexedIn64Bits) {
  const Dims4 dims{4097, 8, 512, 128};  // 2,147,745,792 elements (4 GiB) per tensor
  const std::int64_t elements = count(dims);
  ASSERT_GT(elements, std::int64_t{1} << 31);
  ensure_context();
  std::size_t free_bytes = 0, total_bytes = 0;
  CUJIT_CU_CHECK(jit::detail::driver().cuMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < std::size_t(elements) * 2 * 4 + (std::size_t(1) << 30)) {
    GTEST_SKIP() << "needs 4 x 4 GiB of free GPU memory, " << (free_bytes >> 20) << " MiB free";
  }
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const DType dtype = DType::f16;
  const PatternTensor q = pattern_tensor(dtype, elements, rng);
  const PatternTensor k = pattern_tensor(dtype, elements, rng);
  const PatternTensor v = pattern_tensor(dtype, elements, rng);
  jit::DeviceBuffer out(std::size_t(elements) * 2);
  const auto view = [&](const jit::DeviceBuffer& b) {
    return jit::TensorView::bhsd(b.data(), dtype, dims[0], dims[1], dims[2], dims[3]);
  };
  const std::int64_t head_elements = dims[2] * dims[3];
  const std::int64_t heads = dims[0] * dims[1];
  // Flattened (b, h) heads: the first, the last ending at 2^31, the first
  // starting there, and the last.
  const std::int64_t checked[] = {0, (std::int64_t{1} << 31) / head_elements - 1,
                                  (std::int64_t{1} << 31) / head_elements, heads - 1};
  for (Mask mask : {Mask::none, Mask::top_left}) {
    SCOPED_TRACE(mask == Mask::none ? "full" : "causal");
    poison(out.data(), out.size());
    AttnCase one_head;
    one_head.dtype = dtype;
    one_head.seq_q = one_head.seq_k = dims[2];
    one_head.head_dim = dims[3];
    one_head.mask = mask;
    jit::attention(view(q.buffer), view(k.buffer), view(v.buffer), view(out), options_for(one_head, nullptr));
    synchronize();
    for (std::int64_t head : checked) {
      SCOPED_TRACE(fmt::format("head {} (elements from {})", head, head * head_elements));
      const std::int64_t first = head * head_elements;
      const ReferenceResult ref =
          reference_attention(reference_problem(one_head), pattern_slice(q, first, head_elements),
                              pattern_slice(k, first, head_elements), pattern_slice(v, first, head_elements));
      const std::vector<std::uint16_t> bits =
          download_u16(static_cast<const std::uint16_t*>(out.data()) + first, std::size_t(head_elements));
      std::vector<float> got(bits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) got[i] = decode(dtype, bits[i]);
      expect_output_matches(got, ref, reference_problem(one_head));
    }
  }
}

// ---------------------------------------------------------------------------
// Pointers the kernel's GPU cannot read: refused before any launch, naming
// the tensor. (Memory of another GPU is tested in cujit_gpu_runtime_tests,
// which runs where there are two.)

TEST_F(SpecialInputs, HostMemoryIsRefusedNamingTheTensor) {
  const Dims4 dims{1, 2, 64, 64};
  TestRng rng;
  const std::vector<float> values = rng.normal_vector(std::size_t(count(dims)), DType::f16);
  TestTensor q = make_tensor(Layout::bhsd, DType::f16, dims, &values);
  TestTensor out = make_tensor(Layout::bhsd, DType::f16, dims);
  alignas(16) static std::uint16_t host[2 * 64 * 64];
  const jit::TensorView on_host = jit::TensorView::bhsd(host, DType::f16, 1, 2, 64, 64);
  const jit::Stats before = jit::stats();
  for (const char* which : {"k", "out"}) {
    SCOPED_TRACE(which);
    try {
      if (std::string(which) == "k") jit::attention(q.view, on_host, q.view, out.view);
      else jit::attention(q.view, q.view, q.view, on_host);
      ADD_FAILURE() << "a host pointer was accepted";
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(": ") + which + " at "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not GPU memory"), std::string::npos) << e.what();
    }
  }
  float host_lse[128];
  jit::AttentionOptions options;
  options.lse = host_lse;
  EXPECT_THROW(jit::attention(q.view, q.view, q.view, out.view, options), jit::Error);
  synchronize();
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles) << "a refused call compiled a kernel";
  for (std::uint16_t bits : download_storage(out)) ASSERT_EQ(bits, kPoison16) << "a refused call wrote the output";
}

}  // namespace
}  // namespace cujit_test
