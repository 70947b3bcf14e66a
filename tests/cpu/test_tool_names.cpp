// The tools on names they did not choose. cujit-sass over a cache whose
// metadata names files: --save-sass keeps every file inside its directory and
// writes no file through a link planted there (cuobjdump is replaced by
// `echo`: only the names and the writes are under test). cujit-cache's JSON
// output for a cache directory whose name is not UTF-8.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "cache/cubin_store.h"
#include "cache/sha256.h"
#include "tests/support/fake_cubin.h"

namespace fs = std::filesystem;

namespace {

// Runs `command`, returns its exit status and (in `output`) stdout and stderr.
int run(const std::string& command, const fs::path& scratch, std::string& output) {
  const fs::path log = scratch / "output.txt";
  const int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  std::ifstream in(log);
  output.assign(std::istreambuf_iterator<char>(in), {});
  return status;
}

TEST(CacheTool, JsonOutputOfANonUtf8DirectoryIsValidJson) {
  char tmpl[] = "/tmp/cujit_cache_tool_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  const fs::path cache = tmp / "caf\xe9";  // Latin-1, not UTF-8
  jit::cache::CubinStore(cache).store(jit::cache::sha256_hex("a"), jit::test::fake_cubin("sm_80", "payload"), {{"variant", "v"}, {"arch", "sm_80"}});
  fs::permissions(cache, fs::perms::owner_all);
  for (const char* sub : {"stats --json", "ls --json"}) {
    std::string output;
    const int status = run(std::string(CUJIT_CACHE_TOOL) + " --dir '" + cache.string() + "' " + sub, tmp, output);
    EXPECT_EQ(status, 0) << sub << ": " << output;
    const nlohmann::json parsed = nlohmann::json::parse(output, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << sub << ": " << output;
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

TEST(SassTool, SaveSassKeepsNamesFromMetadataInsideTheDirectory) {
  char tmpl[] = "/tmp/cujit_sass_tool_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  const fs::path cache = tmp / "cache", out = tmp / "out", save = out / "save";
  fs::create_directories(save);
  const jit::cache::CubinStore store(cache);
  store.store(jit::cache::sha256_hex("a"), jit::test::fake_cubin("sm_80", "payload a"), {{"variant", "../escaped_sass"}, {"arch", "sm_80"}});
  store.store(jit::cache::sha256_hex("b"), jit::test::fake_cubin("sm_90a", "payload b"), {{"variant", "plain"}, {"arch", "sm_90a"}});
  // A link at a name the tool will write: it must be replaced, its target untouched.
  const fs::path victim = tmp / "victim.txt";
  std::ofstream(victim) << "unchanged";
  fs::create_symlink(victim, save / "plain.sm_90a.sass");

  std::string output;
  const int status = run(std::string(CUJIT_SASS_TOOL) + " --cache " + cache.string() + " --cuobjdump echo --save-sass " +
                             save.string(),
                         tmp, output);
  EXPECT_EQ(status, 0) << output;

  std::set<std::string> saved;
  for (const auto& e : fs::directory_iterator(save)) saved.insert(e.path().filename().string());
  EXPECT_EQ(saved, (std::set<std::string>{".._escaped_sass.sm_80.sass", "plain.sm_90a.sass"}));
  EXPECT_FALSE(fs::exists(out / "escaped_sass.sm_80.sass")) << "a variant name took the file out of --save-sass";
  EXPECT_FALSE(fs::is_symlink(save / "plain.sm_90a.sass"));
  std::ifstream victim_in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(victim_in), {}), "unchanged");
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

}  // namespace
