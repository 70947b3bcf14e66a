// Which attention family serves a problem on a target (CUJIT_FAMILY unset):
// sm90 on sm_90a for every head dim it has, portable elsewhere, and a clear
// Unsupported error where none fits. No GPU needed (offline targets).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "jit/attention_family.h"
#include "jit/error.h"

namespace {

jit::detail::AttnProblem problem(std::int64_t head_dim) {
  jit::detail::AttnProblem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 2;
  p.seq_q = p.seq_k = 128;
  p.head_dim = head_dim;
  return p;
}

class FamilyChoice : public testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("CUJIT_FAMILY") != nullptr) GTEST_SKIP() << "CUJIT_FAMILY is set; these cases are for auto";
  }
};

TEST_F(FamilyChoice, HopperGetsTheSm90FamilyForEveryHeadDimItHas) {
  const jit::Target hopper = jit::offline_target("sm_90a");
  for (int d : {64, 128, 256}) {
    EXPECT_EQ(jit::detail::attention_family_for(problem(d), hopper).name(), "attn_fwd_sm90") << "d" << d;
  }
}

TEST_F(FamilyChoice, OtherArchsGetThePortableFamily) {
  for (const char* arch : {"sm_89", "sm_80"}) {
    for (int d : {64, 128}) {
      EXPECT_EQ(jit::detail::attention_family_for(problem(d), jit::offline_target(arch)).name(), "attn_fwd_portable")
          << arch << " d" << d;
    }
  }
}

TEST_F(FamilyChoice, NoFamilyIsUnsupportedAndSaysWhatIs) {
  try {
    jit::detail::attention_family_for(problem(256), jit::offline_target("sm_89"));
    FAIL() << "head dim 256 on sm_89 was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("head dim 256"), std::string::npos) << e.what();
  }
  try {
    jit::detail::attention_family_for(problem(96), jit::offline_target("sm_90a"));
    FAIL() << "head dim 96 on sm_90a was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("64, 128, 256"), std::string::npos) << e.what();
  }
}

}  // namespace
