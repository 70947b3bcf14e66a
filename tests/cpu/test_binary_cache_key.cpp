// Tests for jit/binary_cache: the content key of a compiled variant, and the
// disk cache round trip through NVRTC (no GPU needed), including recovery
// from a corrupted entry.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "cache/cubin_store.h"
#include "jit/attention/families.h"
#include "jit/binary_cache.h"
#include "jit/kernel_family.h"
#include "jit/nvrtc_compiler.h"
#include "tests/support/file_bytes.h"

namespace fs = std::filesystem;

namespace {

jit::KernelSources base_sources() {
  return jit::KernelSources{"kernel.cu",
                            {{"kernel.cu", "#include \"helper.cuh\"\ntemplate <int N> __global__ void k() {}\n"},
                             {"helper.cuh", "#pragma once\n__device__ int helper() { return 1; }\n"}}};
}

struct KeyInputs {
  jit::KernelSources sources = base_sources();
  std::string name_expression = "k<128>";
  std::string arch = "sm_90a";
  std::vector<std::string> options = {"-DCUJIT_FOO=1", "--use_fast_math"};

  std::string key() const {
    const jit::detail::CompileRequest request{&sources, name_expression, arch, options};
    return jit::detail::binary_cache_key(request);
  }
};

bool is_lower_hex_64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

using cujit_test::slurp;

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << p;
}

}  // namespace

TEST(BinaryCacheKey, IdenticalInputsGiveIdenticalKeys) {
  const KeyInputs a, b;  // built separately
  EXPECT_EQ(a.key(), b.key());
  EXPECT_EQ(a.key(), a.key());
}

TEST(BinaryCacheKey, IsSixtyFourLowercaseHexChars) {
  const std::string key = KeyInputs{}.key();
  EXPECT_TRUE(is_lower_hex_64(key)) << key;
}

TEST(BinaryCacheKey, ChangesWithEveryInput) {
  const KeyInputs base;
  const std::string base_key = base.key();
  std::set<std::string> keys = {base_key};
  auto expect_changed = [&](const KeyInputs& changed, const char* what) {
    const std::string key = changed.key();
    EXPECT_TRUE(is_lower_hex_64(key)) << what;
    EXPECT_NE(key, base_key) << what;
    EXPECT_TRUE(keys.insert(key).second) << what << " collides with another variation";
  };

  {
    KeyInputs k;
    k.sources.files[1].second += "// one more line\n";  // one included file's text
    expect_changed(k, "included file text");
  }
  {
    KeyInputs k;
    k.sources.files[0].second[k.sources.files[0].second.size() - 3] = ' ';  // entry file's text
    expect_changed(k, "entry file text");
  }
  {
    KeyInputs k;
    k.sources.files[1].first = "helper2.cuh";  // a file name, same text
    expect_changed(k, "file name");
  }
  {
    KeyInputs k;
    k.sources.entry = "helper.cuh";  // the entry name
    expect_changed(k, "entry name");
  }
  {
    KeyInputs k;
    k.name_expression = "k<64>";
    expect_changed(k, "name expression");
  }
  {
    KeyInputs k;
    k.options[0] = "-DCUJIT_FOO=2";
    expect_changed(k, "option value");
  }
  {
    KeyInputs k;
    k.options.push_back("-lineinfo");
    expect_changed(k, "added option");
  }
  {
    KeyInputs k;
    k.options.pop_back();
    expect_changed(k, "removed option");
  }
  {
    KeyInputs k;
    k.arch = "sm_90";  // vs sm_90a: different binaries
    expect_changed(k, "arch sm_90");
  }
  {
    KeyInputs k;
    k.arch = "sm_89";
    expect_changed(k, "arch sm_89");
  }
}

// The key hashes the entry's include closure only: a file the entry cannot
// reach may change without invalidating its cubins.
TEST(BinaryCacheKey, FollowsTheEntrysIncludesOnly) {
  KeyInputs base;
  base.sources.files[1].second = "#pragma once\n#include \"nested.cuh\"\n__device__ int helper() { return 1; }\n";
  base.sources.files.push_back({"nested.cuh", "#pragma once\n__device__ int nested() { return 2; }\n"});
  base.sources.files.push_back({"other_family.cuh", "#pragma once\n__device__ int other() { return 3; }\n"});
  const std::string base_key = base.key();

  KeyInputs outside = base;
  outside.sources.files[3].second += "// edited\n";
  EXPECT_EQ(outside.key(), base_key) << "a file outside the closure changed the key";
  outside.sources.files.push_back({"added.cuh", "__device__ int added();\n"});
  EXPECT_EQ(outside.key(), base_key) << "a file added outside the closure changed the key";

  KeyInputs nested = base;
  nested.sources.files[2].second += "// edited\n";
  EXPECT_NE(nested.key(), base_key) << "an include of an include is in the closure";
}

TEST(BinaryCacheKey, RepeatedAndCyclicIncludesEnd) {
  KeyInputs k;
  k.sources.files = {{"kernel.cu", "#include \"a.cuh\"\n#include \"b.cuh\"\n  #  include \"a.cuh\"\n"},
                     {"a.cuh", "#pragma once\n#include \"b.cuh\"\n"},
                     {"b.cuh", "#pragma once\n#include \"a.cuh\"\n#include \"kernel.cu\"\n"},
                     {"unrelated.cuh", "int x;\n"}};
  const std::string key = k.key();
  EXPECT_TRUE(is_lower_hex_64(key));
  KeyInputs edited = k;
  edited.sources.files[2].second += "// edited\n";  // b.cuh, reached only through the cycle
  EXPECT_NE(edited.key(), key);
  edited = k;
  edited.sources.files[3].second += "// edited\n";
  EXPECT_EQ(edited.key(), key);
}

// A name relative to the including file's folder is followed; an include
// that names no file at all makes every file count.
TEST(BinaryCacheKey, RelativeAndUnresolvedIncludes) {
  KeyInputs k;
  k.sources.files = {{"family/kernel.cu", "#include \"role.cuh\"\n"},
                     {"family/role.cuh", "int role;\n"},
                     {"unrelated.cuh", "int x;\n"}};
  k.sources.entry = "family/kernel.cu";
  const std::string key = k.key();
  KeyInputs edited = k;
  edited.sources.files[1].second += "// edited\n";
  EXPECT_NE(edited.key(), key);
  edited = k;
  edited.sources.files[2].second += "// edited\n";
  EXPECT_EQ(edited.key(), key);

  KeyInputs unresolved = k;
  unresolved.sources.files[0].second += "#include \"not_given.cuh\"\n";
  const std::string unresolved_key = unresolved.key();
  unresolved.sources.files[2].second += "// edited\n";
  EXPECT_NE(unresolved.key(), unresolved_key) << "with an unresolved include every file must count";
}

// The shipped families: a file of one family's own folder is outside the
// other's closure; a shared header is in both.
TEST(BinaryCacheKey, EditingOneFamilysKernelKeepsTheOthersKey) {
  const jit::KernelSources& sm90 = jit::detail::sm90_attention_family().sources();
  const jit::KernelSources& portable = jit::detail::portable_attention_family().sources();
  auto key_with = [](const jit::KernelSources& sources, const std::string& edited_file) {
    jit::KernelSources copy = sources;
    bool found = edited_file.empty();
    for (auto& [name, text] : copy.files) {
      if (name == edited_file) {
        text += "\n// edited\n";
        found = true;
      }
    }
    EXPECT_TRUE(found) << edited_file;
    const jit::detail::CompileRequest request{&copy, "k", "sm_90a", {}};
    return jit::detail::binary_cache_key(request);
  };
  const std::string sm90_key = key_with(sm90, ""), portable_key = key_with(portable, "");
  EXPECT_EQ(key_with(portable, "attention/sm90/mainloop.cuh"), portable_key);
  EXPECT_NE(key_with(sm90, "attention/sm90/mainloop.cuh"), sm90_key);
  EXPECT_EQ(key_with(sm90, "attention/portable/epilogue.cuh"), sm90_key);
  EXPECT_NE(key_with(portable, "attention/portable/epilogue.cuh"), portable_key);
  EXPECT_NE(key_with(sm90, "attention/common/key_blocks.h"), sm90_key);
  EXPECT_NE(key_with(portable, "attention/common/key_blocks.h"), portable_key);
}

// compile_variant through the real disk cache: miss, hit, corrupted entry ->
// recompile, then a hit again.
TEST(BinaryCacheIntegration, CompileHitAndRecoverFromCorruption) {
  const std::string cache_dir = jit::cache_directory();
  if (cache_dir.empty()) GTEST_SKIP() << "the disk cache is off (CUJIT_DISK_CACHE=0)";
  if (const char* env = getenv("CUJIT_CACHE_DIR")) {
    EXPECT_EQ(fs::weakly_canonical(cache_dir), fs::weakly_canonical(env));
  }

  const jit::detail::AttentionFamily& family = jit::detail::portable_attention_family();
  const std::string arch = "sm_80";
  const jit::Json spec = {{"dtype", "f16"}, {"d", 64}, {"causal", false}};
  const jit::Json config = family.default_config(spec, jit::offline_target(arch));

  // Where the entry must land: $CUJIT_CACHE_DIR/cubin/<2 hex>/<key>.cubin.
  const jit::detail::CompileRequest request{&family.sources(), family.name_expression(spec, config), arch,
                                            family.compile_options(spec, config)};
  const std::string key = jit::detail::binary_cache_key(request);
  const fs::path entry = jit::cache::CubinStore(cache_dir).entry_path(key);
  ASSERT_EQ(fs::path(cache_dir) / "cubin", entry.parent_path().parent_path());
  std::error_code ignored;
  fs::remove(entry, ignored);  // a cache dir reused across runs must not make the first call a hit

  auto compile = [&] { return jit::compile_variant(family, spec, config, arch); };

  // 1. Miss: NVRTC compiles and the entry is published.
  jit::Stats before = jit::stats();
  const jit::CompileReport first = compile();
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.variant, family.variant_name(spec, config));
  EXPECT_EQ(first.arch, arch);
  EXPECT_GT(first.registers, 0);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
  ASSERT_TRUE(fs::is_regular_file(entry)) << entry;
  // It is the file found under cubin/**.
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(cache_dir) / "cubin")) {
    if (e.is_regular_file() && e.path().filename() == key + ".cubin") found = e.path() == entry;
  }
  EXPECT_TRUE(found);

  // 2. Hit: nothing compiled, same report.
  before = jit::stats();
  const jit::CompileReport second = compile();
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.variant, first.variant);
  EXPECT_EQ(second.registers, first.registers);
  EXPECT_EQ(second.spill_bytes, first.spill_bytes);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);
  EXPECT_EQ(jit::stats().disk_cache_hits, before.disk_cache_hits + 1);

  // 3. One flipped byte in the middle: a miss, recompiled and republished.
  std::string bytes = slurp(entry);
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() / 2] = char(bytes[bytes.size() / 2] ^ 0x5a);
  spit(entry, bytes);
  before = jit::stats();
  const jit::CompileReport third = compile();
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
  EXPECT_EQ(third.registers, first.registers);
  ASSERT_TRUE(fs::is_regular_file(entry));

  // 4. And then a hit again.
  before = jit::stats();
  EXPECT_TRUE(compile().from_cache);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);

  // 5. A truncated entry (a crash mid-write elsewhere) is a miss too.
  bytes = slurp(entry);
  bytes.resize(bytes.size() / 2);
  spit(entry, bytes);
  before = jit::stats();
  EXPECT_FALSE(compile().from_cache);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles + 1);
  before = jit::stats();
  EXPECT_TRUE(compile().from_cache);
  EXPECT_EQ(jit::stats().nvrtc_compiles, before.nvrtc_compiles);
}
