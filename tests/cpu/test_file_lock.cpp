// The per-key tuning lock across processes: several processes contend for
// one lock file; their critical sections must never overlap.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_error.h"
#include "cache/file_lock.h"

namespace fs = std::filesystem;

namespace {

TEST(FileLock, SerializesProcesses) {
  char pattern[] = "/tmp/cujit-lock-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  const fs::path lock_path = dir / "locks" / "key.lock";
  const fs::path journal = dir / "journal.txt";
  constexpr int kProcesses = 6;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        jit::cache::FileLock lock(lock_path);
        // Inside the critical section: "begin", a pause, "end", each line
        // appended and flushed, so any overlap shows as two begins in a row.
        std::ofstream(journal, std::ios::app) << "begin " << getpid() << std::endl;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::ofstream(journal, std::ios::app) << "end " << getpid() << std::endl;
      } catch (...) {
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream in(journal);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), std::size_t(2 * kProcesses));
  for (std::size_t i = 0; i < lines.size(); i += 2) {
    const std::string pid = lines[i].substr(lines[i].find(' ') + 1);
    EXPECT_EQ(lines[i], "begin " + pid) << "line " << i;
    EXPECT_EQ(lines[i + 1], "end " + pid) << "critical sections overlapped at line " << i + 1;
  }
  EXPECT_EQ(fs::status(lock_path.parent_path()).permissions() & fs::perms::all, fs::perms::owner_all);
  fs::remove_all(dir);
}

// A holder that is stopped (SIGSTOP, a debugger) kept every other process
// waiting for ever: the wait is bounded and its error names the holder.
TEST(FileLock, WaitForAStoppedHolderEndsNamingItsPid) {
  char pattern[] = "/tmp/cujit-lock-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  const fs::path lock_path = dir / "locks" / "key.lock";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      jit::cache::FileLock lock(lock_path);
      raise(SIGSTOP);
    } catch (...) {
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  const auto start = std::chrono::steady_clock::now();
  try {
    jit::cache::FileLock lock(lock_path, std::chrono::milliseconds(300));
    ADD_FAILURE() << "took a lock a stopped process holds";
  } catch (const jit::cache::CacheError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("held by pid " + std::to_string(child)), std::string::npos) << message;
    EXPECT_NE(message.find("kill -CONT"), std::string::npos) << message;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Its lock went with it: the next one is taken at once, and names its own pid.
  {
    jit::cache::FileLock lock(lock_path, std::chrono::milliseconds(0));
    std::ifstream in(lock_path);
    std::string pid;
    in >> pid;
    EXPECT_EQ(pid, std::to_string(getpid()));
  }
  fs::remove_all(dir);
}

}  // namespace
