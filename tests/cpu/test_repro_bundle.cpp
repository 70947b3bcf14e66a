// An NVRTC failure leaves a repro bundle (sources, options, log) in the cache
// and names it in the error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "jit/error.h"
#include "jit/kernel_family.h"

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

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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

}  // namespace
