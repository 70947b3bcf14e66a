#include "cache/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {
namespace {

// The pid the current holder wrote into the lock file ("" when none).
std::string holder_of(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid(text, n > 0 ? std::size_t(n) : 0);
  pid.erase(std::find_if(pid.begin(), pid.end(), [](char c) { return c < '0' || c > '9'; }), pid.end());
  return pid;
}

}  // namespace

FileLock::FileLock(const TrustedDir& dir, std::string_view name, std::chrono::milliseconds wait) {
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
  // Polled rather than blocking: flock has no timeout. The pause grows to
  // 100 ms, so a lock that is freed is taken soon after.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::chrono::milliseconds pause{1};
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    if (error != EWOULDBLOCK) {
      throw CacheError(fmt::format("cannot lock {}: {}", shown, detail::errno_text(error)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string holder = holder_of(fd.get());
      throw CacheError(fmt::format(
          "gave up waiting for {} after {:.1f} s: it is held by pid {} (stopped or hung? `kill -CONT {}` resumes a "
          "stopped one)",
          shown, std::chrono::duration<double>(wait).count(), holder.empty() ? "(unknown)" : holder,
          holder.empty() ? "<pid>" : holder));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  // Says who holds it, for the message above in other processes.
  const std::string pid = std::to_string(::getpid()) + "\n";
  const detail::DeferSigxfsz no_sigxfsz;  // under `ulimit -f 0` the pid is not written, and that is all
  if (::ftruncate(fd.get(), 0) == 0) (void)!::pwrite(fd.get(), pid.data(), pid.size(), 0);
  fd_ = fd.release();
}

FileLock::FileLock(const std::filesystem::path& path, std::chrono::milliseconds wait)
    : FileLock(TrustedDir::open_root(path.parent_path(), /*create=*/true), path.filename().string(), wait) {}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace jit::cache
