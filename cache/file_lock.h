// An exclusive advisory lock (flock) on a file in the cache, held for the
// object's lifetime: one tuning per key per cache directory across processes.
#pragma once
#include <filesystem>

namespace jit::cache {

class FileLock {
 public:
  // Blocks until the lock is held; creates the file (0600) and its directory
  // (0700) if needed. Throws CacheError when the file cannot be opened.
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace jit::cache
