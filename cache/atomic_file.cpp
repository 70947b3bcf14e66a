#include "cache/atomic_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {

namespace {

std::uint64_t random_u64() {
  thread_local std::mt19937_64 rng = [] {
    std::uint64_t seed = static_cast<std::uint64_t>(
        std::chrono::high_resolution_clock::now().time_since_epoch().count());
    seed ^= static_cast<std::uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    seed ^= static_cast<std::uint64_t>(::getpid()) << 32;
    try {
      std::random_device rd;
      seed ^= (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {
      // No entropy source: time, thread and pid still make names unique enough,
      // and O_EXCL guarantees we never reuse someone else's file.
    }
    return std::mt19937_64(seed);
  }();
  return rng();
}

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

sigset_t only_sigxfsz() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGXFSZ);
  return set;
}

bool sigxfsz_pending() {
  sigset_t pending;
  return sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

}  // namespace

namespace detail {

DeferSigxfsz::DeferSigxfsz() {
  const sigset_t set = only_sigxfsz();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  was_pending_ = sigxfsz_pending();
}

DeferSigxfsz::~DeferSigxfsz() {
  if (!was_pending_ && sigxfsz_pending()) {
    const sigset_t set = only_sigxfsz();
    const timespec now{0, 0};
    (void)sigtimedwait(&set, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace detail

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  const std::string target = path.string();
  if (path.empty() || !path.has_filename()) {
    throw CacheError(fmt::format(
        "cannot write cache file '{}': the path does not name a file; this is a bug in the "
        "caller",
        target));
  }
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  detail::create_dirs_0700(parent);

  const std::string name = path.filename().string();
  std::filesystem::path tmp;
  int fd = -1;
  int err = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp = parent / fmt::format(".{}.tmp.{}.{:016x}", name, static_cast<long>(::getpid()),
                               random_u64());
    fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) break;
    err = errno;
    if (err != EEXIST && err != EINTR) break;
  }
  if (fd < 0) {
    throw CacheError(fmt::format(
        "cannot write cache file {}: creating temp file {} failed: {}; check that {} is "
        "writable by you and the disk is not full, or set CUJIT_CACHE_DIR to a directory "
        "you own",
        target, tmp.string(), detail::errno_text(err), parent.string()));
  }

  auto fail = [&](const char* what, int e) -> void {
    close_quietly(fd);
    ::unlink(tmp.c_str());
    throw CacheError(fmt::format(
        "cannot write cache file {}: {} failed: {}; check free disk space and that {} is "
        "writable by you, or set CUJIT_CACHE_DIR to a directory you own",
        target, what, detail::errno_text(e), parent.string()));
  };

  const detail::DeferSigxfsz no_sigxfsz;
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write to temp file", errno);
    }
    if (n == 0) fail("write to temp file", EIO);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  while (::fsync(fd) != 0) {
    if (errno != EINTR) fail("fsync of temp file", errno);
  }
  if (::close(fd) != 0 && errno != EINTR) {
    err = errno;
    fd = -1;
    fail("close of temp file", err);
  }
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail("rename of temp file over the target", errno);
  }
  // Make the rename durable; a failure here does not affect correctness.
  int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

std::optional<std::string> read_regular_file(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO planted at the path must not hang; it has no
  // effect on regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  std::string out;
  try {
    if (st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        ::close(fd);
        return std::nullopt;
      }
      if (n == 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
  } catch (...) {
    ::close(fd);
    return std::nullopt;
  }
  ::close(fd);
  return out;
}

}  // namespace jit::cache
