// A fresh temporary directory per test (mkdtemp under /tmp), removed after
// it, whatever permissions the test left on what it made inside.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace cujit_test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cujit_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    tmp_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    // Make everything removable again (a test may chmod things).
    for (auto it = std::filesystem::recursive_directory_iterator(tmp_, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    }
    std::filesystem::remove_all(tmp_, ec);
  }
  std::filesystem::path tmp_;
};

}  // namespace cujit_test
