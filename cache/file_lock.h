// An exclusive advisory lock (flock) on a file in the cache, held for the
// object's lifetime: one tuning per key per cache directory across processes.
// The holder writes its pid into the file, so a waiter that gives up can say
// who holds it.
#pragma once
#include <chrono>
#include <filesystem>
#include <string_view>

#include "cache/trusted_dir.h"

namespace jit::cache {

// How long a process waits for another's tuning of the same key before it
// tunes without the lock: longer than a full tuning run takes, short enough
// that a stopped or hung holder does not stop everyone else for good.
inline constexpr std::chrono::seconds kFileLockWait{600};

class FileLock {
 public:
  // Waits at most `wait` for the lock on `name` in `dir`; creates the file
  // (0600, O_NOFOLLOW, relative to the checked directory) if needed. Throws
  // CacheError when it cannot be opened, is not a private regular file, or
  // when the wait runs out (naming the holder's pid).
  FileLock(const TrustedDir& dir, std::string_view name, std::chrono::milliseconds wait = kFileLockWait);
  // The same for `path`, whose directory is created (0700) and checked as
  // TrustedDir::open_root checks a root.
  explicit FileLock(const std::filesystem::path& path, std::chrono::milliseconds wait = kFileLockWait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace jit::cache
