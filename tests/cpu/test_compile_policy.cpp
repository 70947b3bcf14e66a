// CUJIT_AUTOTUNE=frozen's rule at the binary layer: a variant missing from
// the disk cache is an error that names cujit-warmup, never a compile; one
// that is cached loads without compiling.
#include <gtest/gtest.h>

#include "jit/attention/families.h"
#include "jit/binary_cache.h"
#include "jit/error.h"
#include "jit/knobs.h"

namespace {

TEST(CompilePolicy, ForbidRefusesToCompileAndNamesWarmup) {
  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  const jit::Json spec = {{"dtype", "bf16"}, {"d", 128}, {"causal", true}};
  const jit::Json config = {{"bm", 64}, {"bn", 32}, {"stages", 3}, {"warps", 4}};
  const jit::Stats before = jit::stats();
  try {
    jit::detail::obtain_binary(family, spec, config, "sm_86", jit::detail::CompilePolicy::forbid);
    FAIL() << "compiled or found a variant that was never compiled";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("cujit-warmup --arch sm_86"), std::string::npos) << e.what();
  }
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);

  // Once warmed, the same request is served from the cache.
  jit::compile_variant(family, spec, config, "sm_86");
  const auto binary =
      jit::detail::obtain_binary(family, spec, config, "sm_86", jit::detail::CompilePolicy::forbid);
  EXPECT_TRUE(binary.from_cache);
  EXPECT_FALSE(binary.cubin.empty());
}

TEST(AutotuneModes, ParseEveryDocumentedMode) {
  using jit::detail::AutotuneMode;
  EXPECT_EQ(jit::detail::parse_autotune_mode("fast"), AutotuneMode::fast);
  EXPECT_EQ(jit::detail::parse_autotune_mode("frozen"), AutotuneMode::frozen);
  EXPECT_EQ(jit::detail::parse_autotune_mode("off"), AutotuneMode::off);
  EXPECT_EQ(jit::detail::parse_autotune_mode(nullptr), AutotuneMode::full);
}

}  // namespace
