// An exclusive advisory lock (flock) on a file in the cache, held for the
// object's lifetime: one tuning per key per cache directory across processes.
#pragma once
#include <filesystem>
#include <string_view>

#include "cache/trusted_dir.h"

namespace jit::cache {

class FileLock {
 public:
  // Blocks until the lock on `name` in `dir` is held; creates the file (0600,
  // O_NOFOLLOW, relative to the checked directory) if needed. Throws
  // CacheError when it cannot be opened or is not a private regular file.
  FileLock(const TrustedDir& dir, std::string_view name);
  // The same for `path`, whose directory is created (0700) and checked as
  // TrustedDir::open_root checks a root.
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace jit::cache
