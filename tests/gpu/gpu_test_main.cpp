// main() of cujit_gpu_tests: the environment the suite runs under. cujit reads
// its knobs once per process, on first use, so they are set here, before any
// cujit call:
//   CUJIT_CACHE_DIR  a fresh mkdtemp directory, removed at exit (kept when
//                    CUJIT_TEST_KEEP_CACHE=1); or $CUJIT_TEST_CACHE_DIR when
//                    set (kept: ctest runs each test in its own process and
//                    shares one such directory per run, see CMakeLists.txt)
//   CUJIT_AUTOTUNE   off (the default config, no tuning: a fast sweep),
//                    unless already set (CUJIT_AUTOTUNE=full to sweep tuned)
// Under --gtest_list_tests (test discovery) nothing is set and nothing
// touches the GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "gpu_test_support.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (cujit_test::listing_tests_only()) return RUN_ALL_TESTS();

  std::optional<cujit_test::TempDir> temp;
  std::string cache_dir;
  try {
    if (const char* shared = std::getenv("CUJIT_TEST_CACHE_DIR"); shared != nullptr && *shared != '\0') {
      cache_dir = shared;
    } else {
      temp.emplace("cujit_gpu_tests");
      cache_dir = (temp->path() / "cache").string();  // cujit creates it, mode 0700
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujit_gpu_tests: cannot make a cache directory: %s\n", e.what());
    return 1;
  }
  ::setenv("CUJIT_CACHE_DIR", cache_dir.c_str(), 1);
  ::setenv("CUJIT_AUTOTUNE", "off", 0);
  std::fprintf(stderr, "cujit_gpu_tests: CUJIT_CACHE_DIR=%s CUJIT_AUTOTUNE=%s\n", cache_dir.c_str(),
               std::getenv("CUJIT_AUTOTUNE"));

  const int status = RUN_ALL_TESTS();
  if (const char* keep = std::getenv("CUJIT_TEST_KEEP_CACHE"); temp && keep != nullptr && std::string(keep) == "1") {
    temp->keep();
    std::fprintf(stderr, "cujit_gpu_tests: kept %s\n", cache_dir.c_str());
  }
  return status;
}
