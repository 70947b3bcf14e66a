#include "cache/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {

FileLock::FileLock(const TrustedDir& dir, std::string_view name) {
  const std::string shown = (dir.path() / name).string();
  const std::string file(name);
  if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
    throw CacheError(fmt::format("lock file name '{}' is not a file name; this is a bug in the caller", file));
  }
  detail::Fd fd(::openat(dir.fd(), file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (fd.get() < 0) {
    throw CacheError(fmt::format("cannot open lock file {}: {}", shown, detail::errno_text(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !untrusted_file_reason(st).empty()) {
    throw CacheError(fmt::format("lock file {} is {}; remove it (cujit creates it again)", shown,
                                 untrusted_file_reason(st)));
  }
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      throw CacheError(fmt::format("cannot lock {}: {}", shown, detail::errno_text(errno)));
    }
  }
  fd_ = fd.release();
}

FileLock::FileLock(const std::filesystem::path& path)
    : FileLock(TrustedDir::open_root(path.parent_path(), /*create=*/true), path.filename().string()) {}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace jit::cache
