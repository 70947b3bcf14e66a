// main() for test programs that call into cujit: points CUJIT_CACHE_DIR at a
// fresh temporary directory before anything reads the knobs, and removes it
// afterwards. Discovery runs (--gtest_list_tests) touch nothing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string dir;
  if (getenv("CUJIT_CACHE_DIR") == nullptr) {
    char pattern[] = "/tmp/cujit-test-cache-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return 2;
    dir = pattern;
    setenv("CUJIT_CACHE_DIR", dir.c_str(), 1);
  }
  const int result = RUN_ALL_TESTS();
  if (!dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return result;
}
