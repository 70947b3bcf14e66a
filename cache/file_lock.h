// An exclusive advisory lock (flock) on a file in the cache, held for the
// object's lifetime: one tuning per key per cache directory across processes.
// The holder writes its pid into the file, so a waiter that gives up can say
// who holds it.
#pragma once
#include <chrono>
#include <filesystem>

namespace jit::cache {

// How long a process waits for another's tuning of the same key before it
// tunes without the lock: longer than a full tuning run takes, short enough
// that a stopped or hung holder does not stop everyone else for good.
inline constexpr std::chrono::seconds kFileLockWait{600};

class FileLock {
 public:
  // Waits at most `wait` for the lock; creates the file (0600) and its
  // directory (0700) if needed. Throws CacheError when the file cannot be
  // opened, or when the wait runs out (naming the holder's pid).
  explicit FileLock(const std::filesystem::path& path, std::chrono::milliseconds wait = kFileLockWait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace jit::cache
