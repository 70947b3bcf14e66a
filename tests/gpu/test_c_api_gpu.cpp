// The C interface on a GPU: cujit_attention writes the same bits as
// jit::attention for the same arguments (strided layouts, GQA, causal
// bottom-right, an explicit scale, the LSE), and cujit_plan names the
// variant plan_attention names; likewise for FP8 inputs with descale factors
// (cujit_options.q_descale, ...), and the serving functions against
// jit/serving.h. libcujit_c.so holds its own copy of the runtime, so this
// also checks that the shared library works on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attention_check.h"
#include "bindings/c/cujit_c.h"
#include "fp8_emulation.h"
#include "gpu_test_support.h"
#include "jit/attention.h"
#include "jit/device.h"
#include "jit/error.h"
#include "jit/serving.h"

namespace cujit_test {
namespace {

cujit_tensor c_tensor(const jit::TensorView& v) {
  cujit_tensor t{};
  t.data = v.data;
  t.dtype = v.dtype == jit::DType::e4m3   ? CUJIT_E4M3
            : v.dtype == jit::DType::e5m2 ? CUJIT_E5M2
            : v.dtype == jit::DType::f16  ? CUJIT_F16
                                          : CUJIT_BF16;
  for (int i = 0; i < 4; ++i) {
    t.shape[i] = v.shape[i];
    t.strides[i] = v.strides[i];
  }
  return t;
}

cujit_options c_options(const jit::AttentionOptions& o) {
  cujit_options c{};
  c.causal = o.causal;
  c.bottom_right = o.align == jit::CausalAlign::BottomRight;
  c.scale = o.scale.value_or(0.f);
  c.stream = o.stream;
  c.lse = o.lse;
  return c;
}

TEST(CApiGpu, SameBitsAsTheCppInterface) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  for (jit::DType dtype : {jit::DType::f16, jit::DType::bf16}) {
    AttnCase c;
    c.dtype = dtype;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seq_q = 100;
    c.seq_k = 300;
    c.head_dim = 64;
    c.mask = Mask::bottom_right;
    c.q_layout = Layout::bshd;
    c.scale = 0.1f;
    SCOPED_TRACE(case_name(c));
    const AttnInputs in = make_inputs(c, rng);
    const Dims4 o_dims{c.batch, c.heads_q, c.seq_q, c.head_dim};
    TestTensor out_cpp = make_tensor(Layout::bhsd, dtype, o_dims);
    TestTensor out_c = make_tensor(Layout::bhsd, dtype, o_dims);
    const std::size_t rows = std::size_t(c.batch * c.heads_q * c.seq_q);
    jit::DeviceBuffer lse_cpp(rows * sizeof(float)), lse_c(rows * sizeof(float));
    poison(out_cpp.buffer.data(), out_cpp.buffer.size());
    poison(out_c.buffer.data(), out_c.buffer.size());
    poison(lse_cpp.data(), lse_cpp.size());
    poison(lse_c.data(), lse_c.size());

    const jit::AttentionOptions cpp_options = options_for(c, static_cast<float*>(lse_cpp.data()));
    jit::attention(in.dq.view, in.dk.view, in.dv.view, out_cpp.view, cpp_options);
    const cujit_tensor q = c_tensor(in.dq.view), k = c_tensor(in.dk.view), v = c_tensor(in.dv.view),
                       o = c_tensor(out_c.view);
    cujit_options options = c_options(options_for(c, static_cast<float*>(lse_c.data())));
    ASSERT_EQ(cujit_attention(&q, &k, &v, &o, &options), CUJIT_OK) << cujit_last_error();
    synchronize();

    const std::vector<std::uint16_t> bits_c = download_storage(out_c);
    EXPECT_EQ(bits_c, download_storage(out_cpp));
    EXPECT_EQ(download_u16(lse_c.data(), 2 * rows), download_u16(lse_cpp.data(), 2 * rows));
    const ReferenceProblem p = reference_problem(c);
    const ReferenceResult ref = reference_attention(p, in.q, in.k, in.v);
    expect_output_matches(gather_logical(bits_c, out_c.view), ref, p);
    expect_lse_matches(download_f32(lse_c.data(), rows), ref);

    char name[256];
    ASSERT_EQ(cujit_plan(&q, &k, &v, &o, &options, name, sizeof name), CUJIT_OK) << cujit_last_error();
    const jit::AttentionPlan plan = jit::plan_attention(in.dq.view, in.dk.view, in.dv.view, out_cpp.view, cpp_options);
    EXPECT_EQ(std::string(name), plan.family + "/" + plan.variant);
  }
}

// e4m3 q, k and v with one factor per KV head (strides {0, 1} through the
// C struct), bf16 out, GQA, causal bottom-right, the LSE: the same bits as
// jit::attention, within the FP8 suite's bound of the float64 reference on
// the dequantized inputs. Before sm_89 both interfaces refuse it.
TEST(CApiGpu, Fp8SameBitsAsTheCppInterface) {
  CUJIT_REQUIRE_GPU();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  AttnCase c;
  c.dtype = jit::DType::bf16;  // out's dtype
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq_q = 100;
  c.seq_k = 300;
  c.head_dim = 128;
  c.mask = Mask::bottom_right;
  const ReferenceProblem p = reference_problem(c);
  const Dims4 q_dims{c.batch, c.heads_q, c.seq_q, c.head_dim}, kv_dims{c.batch, c.heads_kv, c.seq_k, c.head_dim};
  const std::array<std::int64_t, 2> per_head{0, 1};
  const Fp8Values in = quantize_fp8(p, rng.normal_vector(std::size_t(count(q_dims)), jit::DType::f16),
                                    rng.normal_vector(std::size_t(count(kv_dims)), jit::DType::f16),
                                    rng.normal_vector(std::size_t(count(kv_dims)), jit::DType::f16), per_head);
  const TestTensor dq = make_tensor(Layout::bhsd, jit::DType::e4m3, q_dims, &in.q);
  const TestTensor dk = make_tensor(Layout::bhsd, jit::DType::e4m3, kv_dims, &in.k);
  const TestTensor dv = make_tensor(Layout::bhsd, jit::DType::e4m3, kv_dims, &in.v);
  const jit::DeviceBuffer q_descale = upload_bytes(in.q_descale.data(), in.q_descale.size() * sizeof(float));
  const jit::DeviceBuffer k_descale = upload_bytes(in.k_descale.data(), in.k_descale.size() * sizeof(float));
  const jit::DeviceBuffer v_descale = upload_bytes(in.v_descale.data(), in.v_descale.size() * sizeof(float));
  TestTensor out_cpp = make_tensor(Layout::bhsd, c.dtype, q_dims), out_c = make_tensor(Layout::bhsd, c.dtype, q_dims);
  const std::size_t rows = std::size_t(c.batch * c.heads_q * c.seq_q);
  jit::DeviceBuffer lse_cpp(rows * sizeof(float)), lse_c(rows * sizeof(float));
  poison(out_c.buffer.data(), out_c.buffer.size());
  poison(lse_c.data(), lse_c.size());

  jit::AttentionOptions cpp_options = options_for(c, static_cast<float*>(lse_cpp.data()));
  cpp_options.descale = {static_cast<const float*>(q_descale.data()), static_cast<const float*>(k_descale.data()),
                         static_cast<const float*>(v_descale.data()), per_head};
  cujit_options options = c_options(options_for(c, static_cast<float*>(lse_c.data())));
  options.q_descale = cpp_options.descale.q;
  options.k_descale = cpp_options.descale.k;
  options.v_descale = cpp_options.descale.v;
  options.descale_strides[0] = per_head[0];
  options.descale_strides[1] = per_head[1];
  options.has_descale_strides = 1;
  const cujit_tensor q = c_tensor(dq.view), k = c_tensor(dk.view), v = c_tensor(dv.view), o = c_tensor(out_c.view);

  ensure_context();
  if (jit::detail::current_device().target.cc < 89) {
    EXPECT_EQ(cujit_attention(&q, &k, &v, &o, &options), CUJIT_UNSUPPORTED) << cujit_last_error();
    EXPECT_NE(std::string(cujit_last_error()).find("sm_89"), std::string::npos) << cujit_last_error();
    EXPECT_THROW(jit::attention(dq.view, dk.view, dv.view, out_cpp.view, cpp_options), jit::Error);
    return;
  }
  jit::attention(dq.view, dk.view, dv.view, out_cpp.view, cpp_options);
  ASSERT_EQ(cujit_attention(&q, &k, &v, &o, &options), CUJIT_OK) << cujit_last_error();
  synchronize();

  const std::vector<std::uint16_t> bits_c = download_storage(out_c);
  EXPECT_EQ(bits_c, download_storage(out_cpp));
  EXPECT_EQ(download_u16(lse_c.data(), 2 * rows), download_u16(lse_cpp.data(), 2 * rows));
  const ReferenceResult ref = reference_attention(p, in.q_real, in.k_real, in.v_real);
  const ErrorReport emulated = compare(emulate_fp8_attention(p, in, c.dtype), ref.o);
  expect_output_matches(gather_logical(bits_c, out_c.view), ref, p, 1.5 * emulated.rel_l2 + 1e-6);
  expect_lse_matches(download_f32(lse_c.data(), rows), ref);

  char name[256];
  ASSERT_EQ(cujit_plan(&q, &k, &v, &o, &options, name, sizeof name), CUJIT_OK) << cujit_last_error();
  const jit::AttentionPlan plan = jit::plan_attention(dq.view, dk.view, dv.view, out_cpp.view, cpp_options);
  EXPECT_EQ(std::string(name), plan.family + "/" + plan.variant);
}

TEST(CApiGpu, HostPointerIsRefusedWithAMessage) {
  CUJIT_REQUIRE_GPU();
  std::vector<std::uint16_t> host(2 * 16 * 64);
  cujit_tensor t{};
  t.data = host.data();
  t.dtype = CUJIT_F16;
  const std::int64_t shape[4] = {1, 2, 16, 64}, strides[4] = {2 * 16 * 64, 16 * 64, 64, 1};
  for (int i = 0; i < 4; ++i) t.shape[i] = shape[i], t.strides[i] = strides[i];
  const Dims4 dims{1, 2, 16, 64};
  TestTensor k = make_tensor(Layout::bhsd, jit::DType::f16, dims), v = make_tensor(Layout::bhsd, jit::DType::f16, dims),
             out = make_tensor(Layout::bhsd, jit::DType::f16, dims);
  const cujit_tensor ck = c_tensor(k.view), cv = c_tensor(v.view), co = c_tensor(out.view);
  EXPECT_EQ(cujit_attention(&t, &ck, &cv, &co, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("q"), std::string::npos) << cujit_last_error();
}

cujit_kv_cache c_cache(const jit::KvCache& cache) {
  return {c_tensor(cache.k), c_tensor(cache.v), cache.block_table, cache.pages_per_seq, cache.block_table_stride,
          cache.seq_lens, nullptr, nullptr, {0, 0}, 0, 0};
}

// A paged decode-verification batch (Sq = 2, so NULL options' causal mask
// shows): shuffled pages of 16 keys, a length per sequence.
TEST(CApiGpu, KvSameBitsAsTheCppInterfaceAndANarrowTableIsRefused) {
  CUJIT_REQUIRE_GPU();
  const jit::DType f16 = jit::DType::f16;
  const std::int64_t b = 3, hq = 8, hkv = 2, sq = 2, d = 128, page = 16, pages_per_seq = 20;
  const std::int64_t pool_pages = b * pages_per_seq;
  // [num_pages, page_size, Hkv, D] storage: random_tensor's [B, H, S, D] with B, H, S = pages, page, Hkv.
  const jit::DeviceTensor k_pool = jit::random_tensor(f16, pool_pages, page, hkv, d, 11);
  const jit::DeviceTensor v_pool = jit::random_tensor(f16, pool_pages, page, hkv, d, 12);
  const jit::DeviceTensor q = jit::random_tensor(f16, b, hq, sq, d, 13);
  std::vector<std::int32_t> table(static_cast<std::size_t>(pool_pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  const std::vector<std::int32_t> lengths = {2, 170, 320};
  const jit::DeviceBuffer d_table = upload_bytes(table.data(), table.size() * 4);
  const jit::DeviceBuffer d_lengths = upload_bytes(lengths.data(), lengths.size() * 4);
  jit::KvCache cache;
  cache.k = jit::TensorView::bshd(k_pool.buffer.data(), f16, pool_pages, page, hkv, d);
  cache.v = jit::TensorView::bshd(v_pool.buffer.data(), f16, pool_pages, page, hkv, d);
  cache.block_table = static_cast<const std::int32_t*>(d_table.data());
  cache.pages_per_seq = pages_per_seq;
  cache.seq_lens = static_cast<const std::int32_t*>(d_lengths.data());
  const jit::KvAttentionShape shape{b, hq, hkv, d, f16, sq, pages_per_seq * page, page, true, std::nullopt, true};

  const Dims4 o_dims{b, hq, sq, d};
  const std::size_t rows = std::size_t(b * hq * sq);
  TestTensor out_cpp = make_tensor(Layout::bhsd, f16, o_dims), out_c = make_tensor(Layout::bhsd, f16, o_dims);
  jit::DeviceBuffer lse_cpp(rows * 4), lse_c(rows * 4);
  const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape);
  plan.run(q.view, cache, out_cpp.view, {nullptr, static_cast<float*>(lse_cpp.data()), nullptr});

  const cujit_kv_shape c_shape{b, hq, hkv, d, CUJIT_F16, sq, pages_per_seq * page, page, 1, 0, 0, 0};
  cujit_kv_plan* c_plan = nullptr;
  ASSERT_EQ(cujit_kv_plan_create(&c_shape, nullptr, nullptr, &c_plan), CUJIT_OK) << cujit_last_error();
  std::size_t workspace_bytes = 0;
  int splits = 0;
  char name[256];
  ASSERT_EQ(cujit_kv_plan_workspace_bytes(c_plan, &workspace_bytes), CUJIT_OK);
  ASSERT_EQ(cujit_kv_plan_num_splits(c_plan, &splits), CUJIT_OK);
  ASSERT_EQ(cujit_kv_plan_describe(c_plan, name, sizeof name), CUJIT_OK);
  EXPECT_EQ(workspace_bytes, plan.workspace_bytes());
  EXPECT_EQ(splits, plan.num_splits());
  EXPECT_EQ(std::string(name), plan.family() + "/" + plan.variant());

  // The caller's workspace, then the plan's own: the same bits as the C++ plan.
  const cujit_tensor cq = c_tensor(q.view), co = c_tensor(out_c.view);
  const cujit_kv_cache cc = c_cache(cache);
  jit::DeviceBuffer workspace(workspace_bytes);
  for (void* w : {workspace.data(), static_cast<void*>(nullptr)}) {
    poison(out_c.buffer.data(), out_c.buffer.size());
    poison(lse_c.data(), lse_c.size());
    const cujit_kv_run_options run{nullptr, static_cast<float*>(lse_c.data()), w};
    ASSERT_EQ(cujit_kv_plan_run(c_plan, &cq, &cc, &co, &run), CUJIT_OK) << cujit_last_error();
    synchronize();
    EXPECT_EQ(download_storage(out_c), download_storage(out_cpp));
    EXPECT_EQ(download_u16(lse_c.data(), 2 * rows), download_u16(lse_cpp.data(), 2 * rows));
  }

  // A table row of 10 pages holds 160 keys, fewer than the plan's 320.
  cujit_kv_cache narrow = cc;
  narrow.pages_per_seq = 10;
  EXPECT_EQ(cujit_kv_plan_run(c_plan, &cq, &narrow, &co, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("too narrow"), std::string::npos) << cujit_last_error();
  cujit_kv_plan_destroy(c_plan);

  // The one-call form: the same bits as jit::attention_with_kvcache.
  poison(out_c.buffer.data(), out_c.buffer.size());
  jit::attention_with_kvcache(q.view, cache, out_cpp.view);
  ASSERT_EQ(cujit_attention_with_kvcache(&cq, &cc, &co, nullptr, nullptr), CUJIT_OK) << cujit_last_error();
  synchronize();
  EXPECT_EQ(download_storage(out_c), download_storage(out_cpp));
}

}  // namespace
}  // namespace cujit_test
