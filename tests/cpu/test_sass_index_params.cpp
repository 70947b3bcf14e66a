// Index parameters from a kernel family to cujit-sass: a compiled variant's
// cache entry records its family's index_param_offsets, and cujit-sass audits
// its loads through them as indices (cuobjdump is replaced by a script that
// prints a fixed SASS listing). And --mix over saved SASS.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cache/cubin_store.h"
#include "cache/sha256.h"
#include "jit/binary_cache.h"
#include "jit/kernel_family.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

// A kernel that reads lengths: its only parameter is an index pointer, or not.
class LengthsFamily final : public jit::KernelFamily {
 public:
  explicit LengthsFamily(bool index) : index_(index) {}
  std::string name() const override { return index_ ? "lengths_index" : "lengths_plain"; }
  const jit::KernelSources& sources() const override {
    static const jit::KernelSources sources = {
        "lengths.cu",
        {{"lengths.cu", "template <int N> __global__ void lengths(const int* lens, int* out) {\n"
                        "  out[threadIdx.x] = lens[threadIdx.x + N];\n}\n"}}};
    return sources;
  }
  std::vector<jit::Json> config_space(const jit::Json&) const override { return {jit::Json::object()}; }
  std::optional<std::string> why_pruned(const jit::Json&, const jit::Json&, const jit::Target&) const override {
    return std::nullopt;
  }
  jit::Json default_config(const jit::Json&, const jit::Target&) const override { return jit::Json::object(); }
  std::string variant_name(const jit::Json&, const jit::Json&) const override { return name(); }
  std::string name_expression(const jit::Json&, const jit::Json&) const override {
    return index_ ? "lengths<0>" : "lengths<1>";
  }
  std::vector<int> index_param_offsets(const jit::Json&, const jit::Json&) const override {
    return index_ ? std::vector<int>{0} : std::vector<int>{};
  }
  bool reads_only_index_data(const jit::Json&, const jit::Json&) const override { return index_; }

 private:
  bool index_;
};

nlohmann::json entry_meta(const jit::KernelFamily& family) {
  const fs::path path = jit::detail::cached_entry_path(family, jit::Json::object(), jit::Json::object(), "sm_80");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  const auto entry = jit::cache::CubinStore::decode(path.stem().string(), bytes);
  return entry ? entry->meta : nlohmann::json();
}

TEST(SassIndexParams, CompiledEntryRecordsTheFamilysIndexParameters) {
  const LengthsFamily index(true), plain(false);
  jit::compile_variant(index, jit::Json::object(), jit::Json::object(), "sm_80");
  jit::compile_variant(plain, jit::Json::object(), jit::Json::object(), "sm_80");
  const nlohmann::json with = entry_meta(index), without = entry_meta(plain);
  ASSERT_TRUE(with.is_object());
  EXPECT_EQ(with.at("index_params"), nlohmann::json::array({0}));
  EXPECT_EQ(with.at("params_align"), 8);  // the family's params_alignment
  EXPECT_EQ(with.at("index_only"), true);  // the family's reads_only_index_data
  ASSERT_TRUE(without.is_object());
  EXPECT_FALSE(without.contains("index_params"));  // absent means none
  EXPECT_FALSE(without.contains("index_only"));
}

// The decode kernel's shape: a loop up to a length loaded through the
// parameter at offset 0x98 (seq_lens in DecodeParams; c[0x0][0x2a8] on sm_90a).
const char* kLoopSass =
    "\n\tcode for sm_90a\n\t\tFunction : decode\n"
    "        /*0000*/   S2R R0, SR_CTAID.X ;\n"
    "        /*0010*/   ULDC.64 UR4, c[0x0][0x208] ;\n"
    "        /*0020*/   LDC.64 R2, c[0x0][0x2a8] ;\n"
    "        /*0030*/   IMAD.WIDE R2, R0, 0x4, R2 ;\n"
    "        /*0040*/   LDG.E R5, desc[UR4][R2.64] ;\n"
    "        /*0050*/   MOV R7, RZ ;\n"
    "        /*0060*/   IADD3 R7, R7, 0x1, RZ ;\n"
    "        /*0070*/   ISETP.GE.AND P0, PT, R7, R5, PT ;\n"
    "        /*0080*/   @!P0 BRA 0x60 ;\n"
    "        /*0090*/   EXIT ;\n";

int run(const std::string& command, const fs::path& scratch, std::string& output) {
  const fs::path log = scratch / "output.txt";
  const std::string redirect = " > '" + log.string() + "' 2>'" + (scratch / "errors.txt").string() + "'";
  const int status = std::system((command + redirect).c_str());
  std::ifstream in(log);
  output.assign(std::istreambuf_iterator<char>(in), {});
  return WEXITSTATUS(status);
}

int flagged_in(const nlohmann::json& report, const std::string& variant) {
  for (const auto& v : report) {
    if (v.at("variant") == variant) return int(v.at("flagged_branches").size());
  }
  ADD_FAILURE() << "no variant " << variant;
  return -1;
}

class SassToolIndexParams : public cujit_test::TempDirTest {};

TEST_F(SassToolIndexParams, CacheEntryIndexParamsMakeALoadedLengthAnIndex) {
  const fs::path cache = tmp_ / "cache";
  const jit::cache::CubinStore store(cache);
  const std::string cubin = jit::test::fake_cubin("sm_90a", "payload");
  const auto put = [&](const char* variant, const nlohmann::json& index_params,
                       const nlohmann::json& index_only = nullptr) {
    nlohmann::json meta = {{"variant", variant}, {"arch", "sm_90a"}};
    if (!index_params.is_null()) meta["index_params"] = index_params;
    if (!index_only.is_null()) meta["index_only"] = index_only;
    store.store(jit::cache::sha256_hex(variant), cubin, meta);
  };
  put("indexed", {152, 136});  // DecodeParams::seq_lens, block_table
  put("plain", nullptr);
  put("malformed", "152");
  // A kernel that reads nothing but indices (the ragged prepare step): every
  // load is one; only the JSON true says so.
  put("index_only", nullptr, true);
  put("index_only_text", nullptr, "true");
  const fs::path listing = tmp_ / "loop.sass", fake = tmp_ / "fake-cuobjdump";
  std::ofstream(listing) << kLoopSass;
  std::ofstream(fake) << "#!/bin/sh\n[ \"$1\" = -sass ] && cat '" << listing.string() << "'\nexit 0\n";
  fs::permissions(fake, fs::perms::owner_all);

  std::string output;
  const int status = run(std::string(CUJIT_SASS_TOOL) + " --json --strict --cache " + cache.string() +
                             " --cuobjdump " + fake.string(),
                         tmp_, output);
  EXPECT_EQ(status, 1) << output;  // "plain" and "malformed" have a data branch
  const nlohmann::json report = nlohmann::json::parse(output, nullptr, false);
  ASSERT_TRUE(report.is_array()) << output;
  EXPECT_EQ(flagged_in(report, "indexed"), 0);
  EXPECT_EQ(flagged_in(report, "plain"), 1);
  EXPECT_EQ(flagged_in(report, "malformed"), 1);
  EXPECT_EQ(flagged_in(report, "index_only"), 0);
  EXPECT_EQ(flagged_in(report, "index_only_text"), 1);

  // --strict passes over the variant that declares them.
  EXPECT_EQ(run(std::string(CUJIT_SASS_TOOL) + " --strict --variant indexed --cache " + cache.string() +
                    " --cuobjdump " + fake.string(),
                tmp_, output),
            0)
      << output;
  // Saved SASS takes them from --index-params. A failing --strict run
  // prints each flagged branch's chain back to its load.
  EXPECT_EQ(run(std::string(CUJIT_SASS_TOOL) + " --strict --sass " + listing.string(), tmp_, output), 1);
  EXPECT_NE(output.find("data branch at 0x0080"), std::string::npos) << output;
  EXPECT_NE(output.find("LDG.E R5, desc[UR4][R2.64]"), std::string::npos) << output;
  EXPECT_NE(output.find("<- mark starts here"), std::string::npos) << output;
  EXPECT_EQ(run(std::string(CUJIT_SASS_TOOL) + " --strict --index-params 152,136 --sass " + listing.string(),
                tmp_, output),
            0)
      << output;
}

// Several cubins at a time (--jobs): the same report, in the same order, as
// one at a time, and every variant's SASS saved.
TEST_F(SassToolIndexParams, ParallelJobsGiveTheSameReport) {
  const fs::path cache = tmp_ / "cache";
  const jit::cache::CubinStore store(cache);
  const std::string cubin = jit::test::fake_cubin("sm_90a", "payload");
  for (int i = 0; i < 24; ++i) {
    const std::string variant = "variant" + std::to_string(i);
    nlohmann::json meta = {{"variant", variant}, {"arch", "sm_90a"}};
    if (i % 3 == 0) meta["index_params"] = {152, 136};
    store.store(jit::cache::sha256_hex(variant), cubin, meta);
  }
  const fs::path listing = tmp_ / "loop.sass", fake = tmp_ / "fake-cuobjdump", saved = tmp_ / "saved";
  std::ofstream(listing) << kLoopSass;
  std::ofstream(fake) << "#!/bin/sh\n[ \"$1\" = -sass ] && cat '" << listing.string()
                      << "'\n[ \"$1\" = -res-usage ] && echo 'Function decode: REG:40 STACK:0 SHARED:0 LOCAL:0'\n"
                      << "exit 0\n";
  fs::permissions(fake, fs::perms::owner_all);
  fs::create_directory(saved);
  const std::string tool = std::string(CUJIT_SASS_TOOL) + " --json --cache " + cache.string() + " --cuobjdump " +
                           fake.string();
  std::string one, many;
  ASSERT_EQ(run(tool + " --jobs 1", tmp_, one), 0) << one;
  ASSERT_EQ(run(tool + " --jobs 5 --save-sass " + saved.string(), tmp_, many), 0) << many;
  const nlohmann::json report = nlohmann::json::parse(one, nullptr, false);
  ASSERT_TRUE(report.is_array()) << one;
  EXPECT_EQ(report.size(), 24u);
  EXPECT_EQ(report, nlohmann::json::parse(many, nullptr, false));
  EXPECT_EQ(report.at(0).at("resources").at("registers"), 40);
  int flagged = 0;
  for (const auto& v : report) flagged += int(v.at("flagged_branches").size());
  EXPECT_EQ(flagged, 16);  // all but the 8 with index parameters
  EXPECT_EQ(std::distance(fs::directory_iterator(saved), fs::directory_iterator()), 24);
}

// --mix: the loop that runs exp2, by opcode, and its instructions per exp2.
class SassToolMix : public cujit_test::TempDirTest {};

TEST_F(SassToolMix, PrintsTheExp2LoopsOpcodesAndInstructionsPerExp2) {
  const fs::path listing = tmp_ / "softmax.sass";
  std::ofstream(listing) << "\n\tcode for sm_90a\n\t\tFunction : softmax\n"
                            "        /*0000*/   MOV R7, RZ ;\n"
                            "        /*0010*/   FFMA R2, R2, R3, -R4 ;\n"
                            "        /*0020*/   MUFU.EX2 R2, R2 ;\n"
                            "        /*0030*/   FFMA R5, R5, R3, -R4 ;\n"
                            "        /*0040*/   MUFU.EX2 R5, R5 ;\n"
                            "        /*0050*/   IADD3 R7, R7, 0x1, RZ ;\n"
                            "        /*0060*/   ISETP.GE.AND P0, PT, R7, 0x8, PT ;\n"
                            "        /*0070*/   @!P0 BRA 0x10 ;\n"
                            "        /*0080*/   EXIT ;\n";
  std::string output;
  ASSERT_EQ(run(std::string(CUJIT_SASS_TOOL) + " --mix --sass " + listing.string(), tmp_, output), 0) << output;
  EXPECT_NE(output.find("exp2 loop 0x0010-0x0070: 7 instructions, 3.50 per exp2: FFMA 2, MUFU.EX2 2, BRA 1, IADD3 1, "
                        "ISETP 1\n"),
            std::string::npos)
      << output;
  ASSERT_EQ(run(std::string(CUJIT_SASS_TOOL) + " --sass " + listing.string(), tmp_, output), 0) << output;
  EXPECT_EQ(output.find("exp2 loop"), std::string::npos) << "only with --mix: " << output;
}

}  // namespace
