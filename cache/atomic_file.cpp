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

}  // namespace

std::string temp_file_name(std::string_view name) {
  return fmt::format(".{}.tmp.{}.{:016x}", name, static_cast<long>(::getpid()), random_u64());
}

namespace {

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

AtomicFileWriter::AtomicFileWriter(int dir_fd, std::string name, std::string display)
    : dir_fd_(dir_fd), name_(std::move(name)), display_(std::move(display)) {
  if (name_.empty() || name_ == "." || name_ == ".." || name_.find('/') != std::string::npos) {
    throw CacheError(fmt::format("cannot write {}: '{}' is not a file name; this is a bug in the caller", display_,
                                 name_));
  }
  int err = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp_name_ = temp_file_name(name_);
    fd_ = ::openat(dir_fd_, tmp_name_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0) return;
    err = errno;
    if (err != EEXIST && err != EINTR) break;
  }
  tmp_name_.clear();
  throw CacheError(fmt::format(
      "cannot write {}: creating a temp file beside it failed: {}; check that its directory is writable by you and "
      "the disk is not full, or set CUJIT_CACHE_DIR to a directory you own",
      display_, detail::errno_text(err)));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_name_.empty()) ::unlinkat(dir_fd_, tmp_name_.c_str(), 0);
}

void AtomicFileWriter::fail(const char* what, int err) {
  throw CacheError(fmt::format(
      "cannot write {}: {} failed: {}; check free disk space and that its directory is writable by you, or set "
      "CUJIT_CACHE_DIR to a directory you own",
      display_, what, detail::errno_text(err)));
}

void AtomicFileWriter::write(std::string_view bytes) {
  const detail::DeferSigxfsz no_sigxfsz;
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write to the temp file", errno);
    }
    if (n == 0) fail("write to the temp file", EIO);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  size_ += bytes.size();
}

std::uint64_t AtomicFileWriter::commit() {
  while (::fsync(fd_) != 0) {
    if (errno != EINTR) fail("fsync of the temp file", errno);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) fail("close of the temp file", errno);
  if (::renameat(dir_fd_, tmp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
    fail("rename of the temp file over the target", errno);
  }
  tmp_name_.clear();
  (void)::fsync(dir_fd_);  // makes the rename durable; correctness does not depend on it
  return size_;
}

void write_file_atomic_at(int dir_fd, const std::string& name, std::string_view bytes, const std::string& display) {
  AtomicFileWriter out(dir_fd, name, display);
  out.write(bytes);
  out.commit();
}

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
        "cannot write cache file '{}': the path does not name a file; this is a bug in the caller", target));
  }
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  detail::create_dirs_0700(parent);
  const int dir_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    throw CacheError(fmt::format("cannot write {}: cannot open {}: {}", target, parent.string(),
                                 detail::errno_text(errno)));
  }
  try {
    write_file_atomic_at(dir_fd, path.filename().string(), bytes, target);
  } catch (...) {
    ::close(dir_fd);
    throw;
  }
  ::close(dir_fd);
}

std::optional<std::string> read_regular_file(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO planted at the path must not hang; it has no
  // effect on regular files.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out = detail::read_whole_regular_file(fd, nullptr);
  ::close(fd);
  return out;
}

}  // namespace jit::cache
