#include "cache/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/cache_dir.h"
#include "cache/cache_error.h"

namespace jit::cache {

FileLock::FileLock(const std::filesystem::path& path) {
  ensure_private_dir(path.parent_path());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) {
    throw CacheError(fmt::format("cannot open lock file {}: {}", path.string(), std::strerror(errno)));
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int error = errno;
      ::close(fd_);
      fd_ = -1;
      throw CacheError(fmt::format("cannot lock {}: {}", path.string(), std::strerror(error)));
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace jit::cache
