// The C interface (bindings/c/cujit_c.h) without a GPU: arguments are
// checked before any device work, failures come back as statuses with a
// message naming what to fix, and a success clears the message. Its GPU half
// (same bits as jit::attention) is in tests/gpu/test_c_api_gpu.cpp.
#include "bindings/c/cujit_c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

}  // namespace
