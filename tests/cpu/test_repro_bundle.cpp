// An NVRTC failure leaves a repro bundle (sources, options, log) in the cache
// and names it in the error; names from the sources never take the bundle's
// files outside it, links are not followed, bundle names are not guessable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cache/cache_error.h"
#include "cache/safe_path.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "jit/repro_bundle.h"
#include "tests/support/file_bytes.h"

namespace fs = std::filesystem;

namespace {

class BrokenFamily final : public jit::KernelFamily {
 public:
  std::string name() const override { return "broken"; }
  const jit::KernelSources& sources() const override {
    static const jit::KernelSources sources{
        "broken.cu", {{"broken.cu", "#include \"helper.cuh\"\ntemplate <int N> __global__ void k() { undeclared(N); }\n"},
                      {"helper.cuh", "// nothing useful\n"}}};
    return sources;
  }
  std::vector<jit::Json> config_space(const jit::Json&) const override { return {{{"n", 1}}}; }
  std::optional<std::string> why_pruned(const jit::Json&, const jit::Json&, const jit::Target&) const override {
    return std::nullopt;
  }
  jit::Json default_config(const jit::Json&, const jit::Target&) const override { return {{"n", 1}}; }
  std::string variant_name(const jit::Json&, const jit::Json&) const override { return "broken_n1"; }
  std::string name_expression(const jit::Json&, const jit::Json&) const override { return "k<1>"; }
};

using cujit_test::slurp;

TEST(ReproBundle, CompileErrorNamesABundleWithSourcesOptionsAndLog) {
  const BrokenFamily family;
  try {
    jit::compile_variant(family, jit::Json::object(), {{"n", 1}}, "sm_80");
    FAIL() << "a broken kernel compiled";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::Compile);
    const std::string message = e.what();
    EXPECT_NE(message.find("undeclared"), std::string::npos) << "the NVRTC log is not in the error: " << message;
    const std::string marker = "repro bundle (sources, options, log): ";
    const auto at = message.find(marker);
    ASSERT_NE(at, std::string::npos) << message;
    const fs::path bundle = message.substr(at + marker.size());
    EXPECT_EQ(bundle.parent_path().parent_path(), fs::path(jit::cache_directory()));
    EXPECT_NE(slurp(bundle / "src" / "broken.cu").find("undeclared(N)"), std::string::npos);
    EXPECT_TRUE(fs::exists(bundle / "src" / "helper.cuh"));
    EXPECT_NE(slurp(bundle / "options.txt").find("--gpu-architecture=sm_80"), std::string::npos);
    EXPECT_NE(slurp(bundle / "log.txt").find("undeclared"), std::string::npos);
    EXPECT_EQ(slurp(bundle / "name_expression.txt"), "k<1>\n");
  }
}

class ReproBundleFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cujit_repro_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ / "deep" / "er" / "cache";  // room below tmp_ for `..` to aim at
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  // Every regular file under tmp_, relative to it.
  std::set<std::string> files() const {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(tmp_)) {
      if (e.is_regular_file()) out.insert(fs::relative(e.path(), tmp_).string());
    }
    return out;
  }
  fs::path tmp_, root_;
};

jit::detail::CompileRequest request_with(const jit::KernelSources& sources) {
  jit::detail::CompileRequest request;
  request.sources = &sources;
  request.name_expression = "k<1>";
  request.arch = "sm_80";
  return request;
}

TEST(SafePath, NamesBecomeComponentsThatStayPut) {
  using jit::cache::safe_file_name;
  using jit::cache::safe_relative_path;
  EXPECT_EQ(safe_file_name("attn_fwd_d64.sm_90a"), "attn_fwd_d64.sm_90a");
  EXPECT_EQ(safe_file_name("../escaped_sass"), ".._escaped_sass");
  EXPECT_EQ(safe_file_name(".."), "_..");
  EXPECT_EQ(safe_file_name("."), "_.");
  EXPECT_EQ(safe_file_name(""), "_");
  EXPECT_EQ(safe_file_name(std::string("a\0b\n/c", 6)), "a_b__c");
  EXPECT_EQ(safe_file_name(std::string(300, 'x')).size(), 200u);
  EXPECT_EQ(safe_relative_path("attention/common/mask.cuh"), (std::vector<std::string>{"attention", "common", "mask.cuh"}));
  EXPECT_EQ(safe_relative_path("/etc/x.h"), (std::vector<std::string>{"etc", "x.h"}));
  EXPECT_EQ(safe_relative_path("../../../x.h"), (std::vector<std::string>{"_..", "_..", "_..", "x.h"}));
  EXPECT_EQ(safe_relative_path("a/./b//c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(safe_relative_path("/"), (std::vector<std::string>{"_"}));
}

TEST_F(ReproBundleFiles, HostileIncludeNamesAreWrittenInsideTheBundle) {
  const fs::path absolute = tmp_ / "absolute.h";
  const jit::KernelSources sources{"e.cu",
                                   {{"e.cu", "entry"},
                                    {absolute.string(), "absolute"},
                                    {"../../../x.h", "dotdot"},
                                    {"a/../../../../y.h", "inner dotdot"},
                                    {"attention/common/mask.cuh", "nested"}}};
  const fs::path bundle = jit::detail::write_repro_bundle(root_, request_with(sources), "v", "log");
  EXPECT_FALSE(fs::exists(absolute)) << "an absolute include name was written at its absolute path";
  for (const std::string& f : files()) {
    EXPECT_EQ(f.rfind("deep/er/cache/repro/", 0), 0u) << f << " is outside the cache's repro directory";
  }
  const fs::path src = bundle / "src";
  EXPECT_EQ(slurp(src / "e.cu"), "entry");
  EXPECT_EQ(slurp(src / "attention" / "common" / "mask.cuh"), "nested");
  EXPECT_EQ(slurp(src / "_.." / "_.." / "_.." / "x.h"), "dotdot");
  EXPECT_EQ(slurp(src / absolute.relative_path()), "absolute");
  EXPECT_EQ(files().size(), 5u + 3u);
}

TEST_F(ReproBundleFiles, ASymlinkedReproDirectoryIsNotFollowed) {
  const fs::path elsewhere = tmp_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, root_ / "repro");
  const jit::KernelSources sources{"e.cu", {{"e.cu", "entry"}}};
  EXPECT_THROW(jit::detail::write_repro_bundle(root_, request_with(sources), "v", "log"), jit::cache::CacheError);
  EXPECT_TRUE(fs::is_empty(elsewhere)) << "the bundle went through the link";
}

TEST_F(ReproBundleFiles, BundleNamesAreNewAndUnpredictable) {
  const jit::KernelSources sources{"e.cu", {{"e.cu", "entry"}}};
  const fs::path a = jit::detail::write_repro_bundle(root_, request_with(sources), "v", "log");
  const fs::path b = jit::detail::write_repro_bundle(root_, request_with(sources), "v", "log");
  EXPECT_NE(a, b);
  const std::string name = a.filename().string();
  EXPECT_EQ(name.rfind("v-sm_80-", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("v-sm_80-").size() + 12) << name;
  EXPECT_EQ(name.find(std::to_string(::getpid())), std::string::npos) << "the pid makes the name predictable";
  EXPECT_EQ(fs::status(a).permissions() & fs::perms::all, fs::perms::owner_all);
  // A variant name with a slash stays one component.
  const fs::path c = jit::detail::write_repro_bundle(root_, request_with(sources), "../up", "log");
  EXPECT_EQ(c.parent_path(), root_ / "repro");
}

}  // namespace
