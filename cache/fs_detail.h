// Private helpers shared by the cache sources; not part of the public API.
#pragma once
#include <signal.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace jit::cache::detail {

// Opens `dir` (absolute or relative to the working directory) as a directory
// and returns its descriptor, creating each missing component with
// mkdirat(..., 0700). A component this call creates is opened with
// O_NOFOLLOW, so a symlink swapped in after the mkdir is never followed;
// components that already existed are the caller's layout and are followed,
// except the last one when `nofollow_last`. Throws CacheError on failure
// (ELOOP/ENOTDIR of the last component are left to the caller: returns -1
// with errno set only for those two).
int open_dir_creating(const std::filesystem::path& dir, bool nofollow_last);

// Creates each missing component of `dir` as open_dir_creating does. Throws
// CacheError on failure. Does not check ownership or mode.
void create_dirs_0700(const std::filesystem::path& dir);

// Text for an errno value (thread-safe).
std::string errno_text(int err);

// A write past the file-size limit (RLIMIT_FSIZE, `ulimit -f`) raises
// SIGXFSZ, whose default action kills the process and leaves a temp file
// behind. While one of these lives, SIGXFSZ is blocked in this thread, so
// write() just fails with EFBIG and the store fails cleanly, as on a full
// disk; a SIGXFSZ the writes left pending is consumed before the thread's
// signal mask is restored.
class DeferSigxfsz {
 public:
  DeferSigxfsz();
  ~DeferSigxfsz();
  DeferSigxfsz(const DeferSigxfsz&) = delete;
  DeferSigxfsz& operator=(const DeferSigxfsz&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

// Reads the regular file open on `fd` whole (nullopt when it is not a regular
// file, is larger than max_bytes, or cannot be read); its stat goes to `st`
// when given.
std::optional<std::string> read_whole_regular_file(int fd, struct stat* st,
                                                   std::uint64_t max_bytes = UINT64_MAX);

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  int get() const { return fd_; }
  void reset(int fd);
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace jit::cache::detail
