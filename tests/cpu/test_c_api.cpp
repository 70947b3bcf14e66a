// The C interface (bindings/c/cujit_c.h) without a GPU: arguments are
// checked before any device work, failures come back as statuses with a
// message naming what to fix, and a success clears the message; the same
// for the serving functions (cujit_attention_with_kvcache, cujit_kv_plan_*),
// ragged batches (cujit_attention_varlen, cujit_varlen_plan_*) and FP8 inputs' descale factors
// (cujit_options.q_descale, ...: each reaches jit::AttentionOptions::descale).
// Its GPU half (same bits as the C++ interface) is in
// tests/gpu/test_c_api_gpu.cpp.
#include "bindings/c/cujit_c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "jit/kernel_family.h"

namespace {

// A view at a made-up address (never dereferenced: every call here fails,
// or has nothing to do, before touching memory); `slot` keeps views apart.
cujit_tensor bhsd(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, int slot = 0) {
  cujit_tensor t{};
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 32 | std::uintptr_t(slot) << 28);
  t.dtype = CUJIT_F16;
  const std::int64_t shape[4] = {b, h, s, d};
  for (int i = 0; i < 4; ++i) t.shape[i] = shape[i];
  t.strides[3] = 1;
  t.strides[2] = d;
  t.strides[1] = s * d;
  t.strides[0] = h * s * d;
  return t;
}

// A made-up address in `slot`'s region, for the block table and lengths.
const std::int32_t* fake_i32(int slot) {
  return reinterpret_cast<const std::int32_t*>(std::uintptr_t{1} << 32 | std::uintptr_t(slot) << 28);
}

bool has(const std::string& text) { return std::string(cujit_last_error()).find(text) != std::string::npos; }

// A vLLM-style page pool [num_pages, page_size, Hkv, D], viewed as
// [num_pages, Hkv, page_size, D] by permuting its strides.
cujit_tensor page_pool(std::int64_t pages, std::int64_t page_size, std::int64_t hkv, std::int64_t d, int slot) {
  cujit_tensor t = bhsd(pages, hkv, page_size, d, slot);
  t.strides[0] = page_size * hkv * d;
  t.strides[1] = d;
  t.strides[2] = hkv * d;
  t.strides[3] = 1;
  return t;
}

// Decode (Sq = 1) for B = 2, Hq = 8, Hkv = 2, D = 64 over 64 pages of 16 keys,
// 8 pages (128 keys) per sequence.
struct KvArgs {
  cujit_tensor q = bhsd(2, 8, 1, 64, 0), out = bhsd(2, 8, 1, 64, 3);
  cujit_kv_cache cache{page_pool(64, 16, 2, 64, 1), page_pool(64, 16, 2, 64, 2), fake_i32(4), 8, 0, fake_i32(5),
                       nullptr, nullptr, {0, 0}, 0, 0};
  cujit_status call(const cujit_kv_options* options = nullptr, const cujit_kv_run_options* run = nullptr) const {
    return cujit_attention_with_kvcache(&q, &cache, &out, options, run);
  }
};

cujit_kv_shape decode_shape() {
  cujit_kv_shape s{};
  s.batch = 2;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = 64;
  s.dtype = CUJIT_F16;
  s.seq_q = 1;
  s.max_seq_k = 128;
  s.page_size = 16;
  s.per_sequence_lengths = 1;
  return s;
}

// Three sequences packed into 300 query rows and 500 keys: q and out
// [1, 8, 300, 64], k and v [1, 2, 500, 64] in packed [total, H, D] storage.
struct VarlenArgs {
  static cujit_tensor packed(std::int64_t total, std::int64_t h, int slot) {
    cujit_tensor t = bhsd(1, h, total, 64, slot);
    t.strides[0] = total * h * 64;
    t.strides[1] = 64;
    t.strides[2] = h * 64;
    return t;
  }
  cujit_tensor q = packed(300, 8, 0), k = packed(500, 2, 1), v = packed(500, 2, 2), out = packed(300, 8, 3);
  cujit_varlen_batch batch{fake_i32(4), fake_i32(5), 3, 150, 250};
  cujit_status call(const cujit_options* options = nullptr) const {
    return cujit_attention_varlen(&q, &k, &v, &out, &batch, options);
  }
};

TEST(CApi, AbiVersionMatchesTheHeader) { EXPECT_EQ(cujit_c_abi_version(), CUJIT_C_ABI_VERSION); }

TEST(CApi, NullTensorIsAnInvalidArgumentNamingIt) {
  const cujit_tensor t = bhsd(1, 2, 16, 64);
  EXPECT_EQ(cujit_attention(&t, nullptr, &t, &t, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("k is NULL"), std::string::npos) << cujit_last_error();
}

TEST(CApi, UnknownDtypeIsAnInvalidArgumentNamingIt) {
  const cujit_tensor t = bhsd(1, 2, 16, 64);
  cujit_tensor v = t;
  v.dtype = 7;
  EXPECT_EQ(cujit_attention(&t, &t, &v, &t, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("v.dtype is 7"), std::string::npos) << cujit_last_error();
}

TEST(CApi, ShapeMismatchComesBackWithTheLibrarysMessage) {
  const cujit_tensor q = bhsd(1, 2, 16, 64, 0), out = bhsd(1, 2, 16, 64, 3);
  const cujit_tensor k = bhsd(1, 2, 16, 128, 1), v = bhsd(1, 2, 16, 128, 2);  // head dim differs from q's
  const cujit_status status = cujit_attention(&q, &k, &v, &out, nullptr);
  EXPECT_EQ(status, CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("128"), std::string::npos) << cujit_last_error();
}

TEST(CApi, ASuccessClearsTheLastMessage) {
  const cujit_tensor t = bhsd(1, 2, 16, 64);
  ASSERT_NE(cujit_attention(&t, nullptr, &t, &t, nullptr), CUJIT_OK);
  ASSERT_STRNE(cujit_last_error(), "");
  // No query rows: nothing to compute, which succeeds without a device.
  const cujit_tensor empty_q = bhsd(1, 2, 0, 64, 0), k = bhsd(1, 2, 16, 64, 1), v = bhsd(1, 2, 16, 64, 2),
                     empty_out = bhsd(1, 2, 0, 64, 3);
  EXPECT_EQ(cujit_attention(&empty_q, &k, &v, &empty_out, nullptr), CUJIT_OK) << cujit_last_error();
  EXPECT_STREQ(cujit_last_error(), "");
}

TEST(CApi, OptionsReachTheLibrary) {
  const cujit_tensor q = bhsd(1, 2, 16, 64, 0), k = bhsd(1, 2, 16, 64, 1), v = bhsd(1, 2, 16, 64, 2),
                     out = bhsd(1, 2, 16, 64, 3);
  cujit_options options{};
  options.scale = -1.f;  // the library refuses a scale that is not > 0
  EXPECT_EQ(cujit_attention(&q, &k, &v, &out, &options), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("scale"), std::string::npos) << cujit_last_error();
}

// The shape whose element count wrapped to 0 got past validation with a NULL
// pointer, zero output strides, odd strides or a misaligned pointer (the
// call came back "no device"); a stride near INT64_MAX overflowed the extent.
TEST(CApi, ShapesAndStridesThatOverflowAreInvalidArgumentsNamingTheTensor) {
  const cujit_tensor k = bhsd(1, 2, 16, 64, 1), v = bhsd(1, 2, 16, 64, 2);
  cujit_tensor huge{};
  huge.dtype = CUJIT_F16;
  const std::int64_t shape[4] = {32768, 32768, std::int64_t{1} << 28, 64};
  for (int i = 0; i < 4; ++i) huge.shape[i] = shape[i];
  cujit_tensor odd = huge;
  odd.data = reinterpret_cast<void*>(std::uintptr_t{0x1003});
  odd.strides[0] = 7;
  odd.strides[1] = 5;
  odd.strides[2] = 3;
  odd.strides[3] = 1;
  const cujit_tensor ok_q = bhsd(1, 2, 16, 64, 0), ok_out = bhsd(1, 2, 16, 64, 3);
  struct Case {
    const cujit_tensor *q, *out;
    const char* named;
  };
  for (const Case& c : {Case{&huge, &ok_out, "q's shape"}, Case{&odd, &ok_out, "q's shape"},
                        Case{&ok_q, &huge, "out's shape"}}) {
    EXPECT_EQ(cujit_attention(c.q, &k, &v, c.out, nullptr), CUJIT_INVALID_ARGUMENT) << cujit_last_error();
    EXPECT_NE(std::string(cujit_last_error()).find(c.named), std::string::npos) << cujit_last_error();
    EXPECT_NE(std::string(cujit_last_error()).find("more elements"), std::string::npos) << cujit_last_error();
  }
  cujit_tensor far = bhsd(2, 2, 16, 64, 3);
  far.strides[0] = INT64_MAX - 7;
  const cujit_tensor q2 = bhsd(2, 2, 16, 64, 0), k2 = bhsd(2, 2, 16, 64, 1), v2 = bhsd(2, 2, 16, 64, 2);
  EXPECT_EQ(cujit_attention(&q2, &k2, &v2, &far, nullptr), CUJIT_INVALID_ARGUMENT) << cujit_last_error();
  EXPECT_NE(std::string(cujit_last_error()).find("out's shape [2, 2, 16, 64] and strides"), std::string::npos)
      << cujit_last_error();
  char buffer[64];
  EXPECT_EQ(cujit_plan(&huge, &k, &v, &ok_out, nullptr, buffer, sizeof buffer), CUJIT_INVALID_ARGUMENT);
}

TEST(CApi, PlanRefusesAMissingBuffer) {
  const cujit_tensor t = bhsd(1, 2, 16, 64);
  EXPECT_EQ(cujit_plan(&t, &t, &t, &t, nullptr, nullptr, 0), CUJIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cujit_last_error()).find("buffer"), std::string::npos) << cujit_last_error();
}

TEST(CApi, KvNullArgumentsAreInvalidArgumentsNamingThem) {
  const KvArgs a;
  EXPECT_EQ(cujit_attention_with_kvcache(nullptr, &a.cache, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("q is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_attention_with_kvcache(&a.q, nullptr, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("cache is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_attention_with_kvcache(&a.q, &a.cache, nullptr, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("out is NULL")) << cujit_last_error();

  EXPECT_EQ(cujit_kv_plan_run(nullptr, &a.q, &a.cache, &a.out, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  std::size_t bytes = 7;
  int splits = 7;
  char name[64];
  EXPECT_EQ(cujit_kv_plan_workspace_bytes(nullptr, &bytes), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_kv_plan_num_splits(nullptr, &splits), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_kv_plan_describe(nullptr, name, sizeof name), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_kv_plan_describe(nullptr, nullptr, 0), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("cujit_kv_plan_describe needs a buffer")) << cujit_last_error();
  EXPECT_EQ(bytes, 7u);
  EXPECT_EQ(splits, 7);

  const cujit_kv_shape shape = decode_shape();
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  cujit_kv_plan* plan = reinterpret_cast<cujit_kv_plan*>(std::uintptr_t{16});  // a stale value, reset on failure
  EXPECT_EQ(cujit_kv_plan_create(nullptr, nullptr, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("shape is NULL")) << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
  cujit_kv_plan_destroy(nullptr);  // a no-op
}

TEST(CApi, KvUnknownDtypeIsAnInvalidArgumentNamingIt) {
  KvArgs a;
  a.cache.v.dtype = 7;
  EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("cache.v.dtype is 7")) << cujit_last_error();
  cujit_kv_shape shape = decode_shape();
  shape.dtype = 9;
  cujit_kv_plan* plan = nullptr;
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("shape.dtype is 9")) << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
}

// CUJIT_E5M2 is a cache's dtype: q in it is refused by name; a cache in it
// passes the shape's checks (and then needs a device: the GPU suite plans
// and runs such caches where there is one).
TEST(CApi, E5m2IsACacheDtype) {
  cujit_kv_shape shape = decode_shape();
  shape.kv_dtype = CUJIT_E5M2;
  cujit_kv_plan* plan = nullptr;
  if (!jit::gpu_present()) {
    EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_NO_DEVICE) << cujit_last_error();
    EXPECT_EQ(plan, nullptr);
  }
  shape.dtype = CUJIT_E5M2;
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("shape.dtype (q's and out's) is e5m2")) << cujit_last_error();
}

// jit::attention_with_kvcache checks its arguments before it looks for a
// device, so the library's own messages come back here without a GPU.
TEST(CApi, KvCacheMistakesComeBackWithTheLibrarysMessage) {
  {
    KvArgs a;
    a.cache.block_table_stride = 3;  // rows of 8 pages cannot be 3 entries apart
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("cache.block_table_stride is 3")) << cujit_last_error();
  }
  {
    KvArgs a;
    a.cache.k = page_pool(64, 0, 2, 64, 1);
    a.cache.v = page_pool(64, 0, 2, 64, 2);
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("pages of 0 keys")) << cujit_last_error();
  }
  {
    KvArgs a;
    a.cache.v = page_pool(64, 16, 4, 64, 2);
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("cache.k and cache.v must have the same shape")) << cujit_last_error();
  }
  {
    KvArgs a;
    a.cache.pages_per_seq = -1;
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("cache.pages_per_seq is -1")) << cujit_last_error();
  }
  {
    KvArgs a;
    a.cache.block_table = nullptr;  // contiguous: [B, Hkv, S_cap, D] with B = 64 is not q's batch of 2
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("cache.k has 64 sequences")) << cujit_last_error();
  }
}

TEST(CApi, KvOptionsAndRunOptionsReachTheLibrary) {
  const KvArgs a;
  cujit_kv_options options{1, 0.f, 300};
  EXPECT_EQ(a.call(&options), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.num_splits is 300")) << cujit_last_error();
  options = {1, -1.f, 0};
  EXPECT_EQ(a.call(&options), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.scale")) << cujit_last_error();
  cujit_kv_run_options run{};
  run.lse = reinterpret_cast<float*>(std::uintptr_t{0x70000002});
  EXPECT_EQ(a.call(nullptr, &run), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("run.lse must be 4-byte aligned")) << cujit_last_error();
}

TEST(CApi, KvEmptyBatchSucceedsWithoutADeviceAndClearsTheMessage) {
  KvArgs a;
  a.q = bhsd(0, 8, 1, 64, 0);
  a.out = bhsd(0, 8, 1, 64, 3);
  ASSERT_EQ(cujit_attention_with_kvcache(nullptr, &a.cache, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_EQ(a.call(), CUJIT_OK) << cujit_last_error();
  EXPECT_STREQ(cujit_last_error(), "");
}

TEST(CApi, KvPlanCreateChecksTheShapeBeforeTheDevice) {
  cujit_kv_shape shape = decode_shape();
  shape.heads_q = 6;  // not a multiple of heads_kv = 4
  shape.heads_kv = 4;
  cujit_kv_plan* plan = nullptr;
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("shape.heads_q (6) must be a multiple of shape.heads_kv (4)")) << cujit_last_error();
  shape = decode_shape();
  shape.page_size = 300;
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("shape.page_size is 300")) << cujit_last_error();
  const cujit_kv_options options{1, 0.f, -2};
  shape = decode_shape();
  EXPECT_EQ(cujit_kv_plan_create(&shape, &options, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.num_splits is -2")) << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
}

TEST(CApi, KvPlanCreateWithoutAGpuIsNoDevice) {
  if (jit::gpu_present()) GTEST_SKIP() << "a GPU is present: tests/gpu/test_c_api_gpu.cpp makes plans there";
  const cujit_kv_shape shape = decode_shape();
  cujit_kv_plan* plan = nullptr;
  EXPECT_EQ(cujit_kv_plan_create(&shape, nullptr, nullptr, &plan), CUJIT_NO_DEVICE) << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
  EXPECT_STRNE(cujit_last_error(), "");
}

// q, k and v e4m3, out bf16, for B = 2, Hq = 8, Hkv = 2, S = 128, D = 64,
// with descale factors at made-up float-aligned addresses.
struct Fp8Args {
  static cujit_tensor e4m3(std::int64_t h, int slot) {
    cujit_tensor t = bhsd(2, h, 128, 64, slot);
    t.dtype = CUJIT_E4M3;
    return t;
  }
  static cujit_tensor bf16(int slot) {
    cujit_tensor t = bhsd(2, 8, 128, 64, slot);
    t.dtype = CUJIT_BF16;
    return t;
  }
  cujit_tensor q = e4m3(8, 0), k = e4m3(2, 1), v = e4m3(2, 2), out = bf16(3);
  cujit_options options = descaled();
  static cujit_options descaled() {
    cujit_options o{};
    o.q_descale = reinterpret_cast<const float*>(fake_i32(4));
    o.k_descale = reinterpret_cast<const float*>(fake_i32(5));
    o.v_descale = reinterpret_cast<const float*>(fake_i32(6));
    return o;
  }
  cujit_status call() const { return cujit_attention(&q, &k, &v, &out, &options); }
  cujit_status plan() const {
    char name[64];
    return cujit_plan(&q, &k, &v, &out, &options, name, sizeof name);
  }
};

// jit::attention checks the factors before it looks for a device: each
// field's own message comes back, so each field reaches the library.
TEST(CApi, Fp8MissingOrMisalignedDescalesNameTheField) {
  for (int missing = 0; missing < 3; ++missing) {
    Fp8Args a;
    const float** fields[] = {&a.options.q_descale, &a.options.k_descale, &a.options.v_descale};
    *fields[missing] = nullptr;
    const std::string named = std::string("options.descale.") + "qkv"[missing] + " is null";
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has(named)) << cujit_last_error();
    EXPECT_EQ(a.plan(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has(named)) << cujit_last_error();

    *fields[missing] = reinterpret_cast<const float*>(std::uintptr_t{0x70000002});
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has(std::string("options.descale.") + "qkv"[missing] + " must be 4-byte aligned"))
        << cujit_last_error();
  }
  Fp8Args none;
  none.options = cujit_options{};  // no factors at all, as a caller of ABI version 2 would pass
  EXPECT_EQ(none.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.descale.q is null")) << cujit_last_error();
}

TEST(CApi, Fp8DescaleStridesAreReadOnlyWhenFlagged) {
  Fp8Args a;
  a.options.descale_strides[0] = -1;
  a.options.descale_strides[1] = 0;
  a.options.has_descale_strides = 1;
  EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.descale.strides are {-1, 0}")) << cujit_last_error();
  a.options.descale_strides[0] = INT64_MAX / 2;  // batch 1's factors past a 64-bit offset
  EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("reach past a 64-bit offset")) << cujit_last_error();
  if (jit::gpu_present()) GTEST_SKIP() << "a GPU is present: the fake pointers here must not reach it";
  a.options.has_descale_strides = 0;  // the same strides, not read: a contiguous [B, Hkv] instead
  EXPECT_EQ(a.call(), CUJIT_NO_DEVICE) << cujit_last_error();
  a.options.descale_strides[0] = a.options.descale_strides[1] = 0;  // one factor per tensor
  a.options.has_descale_strides = 1;
  EXPECT_EQ(a.call(), CUJIT_NO_DEVICE) << cujit_last_error();
  EXPECT_EQ(a.plan(), CUJIT_NO_DEVICE) << cujit_last_error();
}

TEST(CApi, Fp8DescalesWith16BitInputsAndMixedDtypesAreRefused) {
  const cujit_tensor q = bhsd(2, 8, 128, 64, 0), k = bhsd(2, 2, 128, 64, 1), v = bhsd(2, 2, 128, 64, 2),
                     out = bhsd(2, 8, 128, 64, 3);
  const cujit_options options = Fp8Args::descaled();
  EXPECT_EQ(cujit_attention(&q, &k, &v, &out, &options), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.descale.q is set but q is f16")) << cujit_last_error();
  cujit_options strides_only{};
  strides_only.has_descale_strides = 1;
  EXPECT_EQ(cujit_attention(&q, &k, &v, &out, &strides_only), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.descale.strides is set")) << cujit_last_error();

  Fp8Args mixed;
  mixed.v.dtype = CUJIT_F16;
  EXPECT_EQ(mixed.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("got q e4m3, k e4m3, v f16, out bf16")) << cujit_last_error();
  Fp8Args fp8_out;
  fp8_out.out.dtype = CUJIT_E4M3;
  EXPECT_EQ(fp8_out.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("out e4m3")) << cujit_last_error();
}

TEST(CApi, Fp8RaggedBatchPassesItsChecksWithItsDescales) {
  VarlenArgs a;
  for (cujit_tensor* t : {&a.q, &a.k, &a.v}) t->dtype = CUJIT_E4M3;
  a.out.dtype = CUJIT_BF16;
  EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("options.descale.q is null")) << cujit_last_error();
  if (jit::gpu_present()) return;  // the fake pointers here must not reach it
  const cujit_options options = Fp8Args::descaled();
  EXPECT_EQ(a.call(&options), CUJIT_NO_DEVICE) << cujit_last_error();  // valid: only the GPU is missing
}

TEST(CApi, VarlenNullArgumentsAreInvalidArgumentsNamingThem) {
  const VarlenArgs a;
  EXPECT_EQ(cujit_attention_varlen(nullptr, &a.k, &a.v, &a.out, &a.batch, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("q is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_attention_varlen(&a.q, &a.k, nullptr, &a.out, &a.batch, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("v is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_attention_varlen(&a.q, &a.k, &a.v, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("batch is NULL")) << cujit_last_error();
  VarlenArgs odd;
  odd.out.dtype = 5;
  EXPECT_EQ(odd.call(), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("out.dtype is 5")) << cujit_last_error();
}

// jit::attention_varlen checks its arguments before it looks for a device,
// so the library's own messages come back here without a GPU.
TEST(CApi, VarlenBatchMistakesComeBackWithTheLibrarysMessage) {
  {
    VarlenArgs a;
    a.q = bhsd(2, 8, 150, 64, 0);  // [B, H, S, D] with B = 2: not packed
    a.out = bhsd(2, 8, 150, 64, 3);
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("must have batch 1")) << cujit_last_error();
  }
  {
    VarlenArgs a;
    a.batch.cu_seqlens_k = nullptr;
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("batch.cu_seqlens_k")) << cujit_last_error();
  }
  {
    VarlenArgs a;
    a.batch.batch = -2;
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("batch.batch must not be negative")) << cujit_last_error();
  }
  {
    VarlenArgs a;
    a.batch.max_seqlen_q = 301;  // longer than q's 300 packed rows
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("batch.max_seqlen_q (301)")) << cujit_last_error();
  }
  {
    VarlenArgs a;
    a.batch.max_seqlen_k = 501;
    EXPECT_EQ(a.call(), CUJIT_INVALID_ARGUMENT);
    EXPECT_TRUE(has("batch.max_seqlen_k (501)")) << cujit_last_error();
  }
}

TEST(CApi, VarlenOptionsReachTheLibrary) {
  const VarlenArgs a;
  cujit_options options{};
  options.scale = -1.f;
  EXPECT_EQ(a.call(&options), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("scale")) << cujit_last_error();
  options = cujit_options{};
  options.lse = reinterpret_cast<float*>(std::uintptr_t{0x70000002});
  EXPECT_EQ(a.call(&options), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("lse must be 4-byte aligned")) << cujit_last_error();
}

TEST(CApi, VarlenEmptyBatchSucceedsWithoutADeviceAndClearsTheMessage) {
  VarlenArgs a;
  ASSERT_EQ(cujit_attention_varlen(&a.q, &a.k, &a.v, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  a.batch = cujit_varlen_batch{};  // no sequences, no prefix sums
  EXPECT_EQ(a.call(), CUJIT_OK) << cujit_last_error();
  EXPECT_STREQ(cujit_last_error(), "");
}

TEST(CApi, VarlenWithoutAGpuIsNoDevice) {
  if (jit::gpu_present()) GTEST_SKIP() << "a GPU is present: the fake pointers here must not reach it";
  const VarlenArgs a;
  EXPECT_EQ(a.call(), CUJIT_NO_DEVICE) << cujit_last_error();
  EXPECT_STRNE(cujit_last_error(), "");
}

// --- cujit_varlen_plan_* ------------------------------------------------------

TEST(CApi, VarlenPlanNullArgumentsAreInvalidArgumentsNamingThem) {
  const VarlenArgs a;
  EXPECT_EQ(cujit_varlen_plan_create(&a.q, &a.k, &a.v, &a.out, &a.batch, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  cujit_varlen_plan* plan = reinterpret_cast<cujit_varlen_plan*>(std::uintptr_t{16});  // a stale value, reset
  EXPECT_EQ(cujit_varlen_plan_create(&a.q, nullptr, &a.v, &a.out, &a.batch, nullptr, &plan), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("k is NULL")) << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(cujit_varlen_plan_prepare(nullptr, &a.batch, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run(nullptr, &a.q, &a.k, &a.v, &a.out, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_prepare_in(nullptr, &a.batch, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run_in(nullptr, &a.q, &a.k, &a.v, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  std::size_t bytes = 1;
  EXPECT_EQ(cujit_varlen_plan_workspace_bytes(nullptr, &bytes), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  char name[8];
  EXPECT_EQ(cujit_varlen_plan_describe(nullptr, name, sizeof(name)), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("plan is NULL")) << cujit_last_error();
  cujit_varlen_plan_destroy(nullptr);  // a no-op
}

// A batch with no sequences plans and runs without a device; a run's mask
// and scale must be the plan's, and its tensors the plan's shapes.
TEST(CApi, VarlenPlanOfAnEmptyBatchChecksItsRuns) {
  VarlenArgs a;
  a.batch = cujit_varlen_batch{};
  cujit_options causal{};
  causal.causal = 1;
  causal.bottom_right = 1;
  cujit_varlen_plan* plan = nullptr;
  ASSERT_EQ(cujit_varlen_plan_create(&a.q, &a.k, &a.v, &a.out, &a.batch, &causal, &plan), CUJIT_OK)
      << cujit_last_error();
  ASSERT_NE(plan, nullptr);
  // Nothing is launched: no tile list, no variant.
  std::size_t bytes = 1;
  EXPECT_EQ(cujit_varlen_plan_workspace_bytes(plan, &bytes), CUJIT_OK) << cujit_last_error();
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(cujit_varlen_plan_workspace_bytes(plan, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("bytes is NULL")) << cujit_last_error();
  char name[8] = "stale";
  EXPECT_EQ(cujit_varlen_plan_describe(plan, name, sizeof(name)), CUJIT_OK) << cujit_last_error();
  EXPECT_STREQ(name, "");
  EXPECT_EQ(cujit_varlen_plan_describe(plan, nullptr, 8), CUJIT_INVALID_ARGUMENT);
  EXPECT_EQ(cujit_varlen_plan_prepare(plan, &a.batch, nullptr), CUJIT_OK) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run(plan, &a.q, &a.k, &a.v, &a.out, &causal), CUJIT_OK) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_prepare_in(plan, &a.batch, nullptr, nullptr), CUJIT_OK) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run_in(plan, &a.q, &a.k, &a.v, &a.out, &causal, nullptr), CUJIT_OK)
      << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run_in(plan, &a.q, &a.k, &a.v, &a.out, nullptr, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("not the plan's")) << cujit_last_error();
  EXPECT_EQ(cujit_varlen_plan_run(plan, &a.q, &a.k, &a.v, &a.out, nullptr), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("not the plan's")) << cujit_last_error();
  cujit_options top_left = causal;
  top_left.bottom_right = 0;
  EXPECT_EQ(cujit_varlen_plan_run(plan, &a.q, &a.k, &a.v, &a.out, &top_left), CUJIT_INVALID_ARGUMENT);
  cujit_options scaled = causal;
  scaled.scale = 0.5f;
  EXPECT_EQ(cujit_varlen_plan_run(plan, &a.q, &a.k, &a.v, &a.out, &scaled), CUJIT_INVALID_ARGUMENT);
  const cujit_tensor more_keys = VarlenArgs::packed(501, 2, 1);
  EXPECT_EQ(cujit_varlen_plan_run(plan, &a.q, &more_keys, &more_keys, &a.out, &causal), CUJIT_INVALID_ARGUMENT);
  EXPECT_TRUE(has("make a plan for them")) << cujit_last_error();
  cujit_varlen_plan_destroy(plan);
}

TEST(CApi, VarlenPlanWithoutAGpuIsNoDevice) {
  if (jit::gpu_present()) GTEST_SKIP() << "a GPU is present: the fake pointers here must not reach it";
  const VarlenArgs a;
  cujit_varlen_plan* plan = nullptr;
  EXPECT_EQ(cujit_varlen_plan_create(&a.q, &a.k, &a.v, &a.out, &a.batch, nullptr, &plan), CUJIT_NO_DEVICE)
      << cujit_last_error();
  EXPECT_EQ(plan, nullptr);
}

}  // namespace
