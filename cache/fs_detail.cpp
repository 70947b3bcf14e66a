#include "cache/fs_detail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "cache/cache_error.h"

namespace jit::cache::detail {

std::string errno_text(int err) { return std::generic_category().message(err); }

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int open_dir_creating(const std::filesystem::path& dir, bool nofollow_last) {
  if (dir.empty()) {
    throw CacheError("cache directory path is empty; set CUJIT_CACHE_DIR to a directory you own");
  }
  // Checked before anything is created: mkdir would otherwise make every
  // component that fits and fail only past the limit, leaving them behind.
  const std::string shown = dir.native().size() > 120 ? dir.native().substr(0, 120) + "..." : dir.native();
  if (dir.native().size() >= PATH_MAX) {
    throw CacheError(fmt::format(
        "cannot create cache directory {}: the path is {} bytes, longer than the system's limit ({}); set "
        "CUJIT_CACHE_DIR to a shorter path",
        shown, dir.native().size(), PATH_MAX - 1));
  }
  for (const auto& part : dir) {
    if (part.native().size() > NAME_MAX) {
      throw CacheError(fmt::format(
          "cannot create cache directory {}: one of its names is {} bytes, longer than the system's limit ({}); "
          "set CUJIT_CACHE_DIR to a shorter path",
          shown, part.native().size(), NAME_MAX));
    }
  }
  std::vector<std::string> parts;
  for (const auto& part : dir.relative_path()) {
    if (!part.empty()) parts.push_back(part.string());  // a trailing separator gives an empty part
  }
  Fd fd(::open(dir.is_absolute() ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw CacheError(fmt::format("cannot create cache directory {}: cannot open its start: {}", dir.string(),
                                 errno_text(errno)));
  }
  std::filesystem::path prefix = dir.root_path();
  bool created = false;  // once we create a component, every later one is ours too
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& name = parts[i];
    prefix /= name;
    const bool last = i + 1 == parts.size();
    // What this call creates is never followed; what existed is the caller's layout.
    const int follow = (created || (last && nofollow_last)) ? O_NOFOLLOW : 0;
    int next = created ? -1 : ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | follow);
    if (created || (next < 0 && errno == ENOENT)) {
      if (::mkdirat(fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
        const int err = errno;
        throw CacheError(fmt::format(
            "cannot create cache directory {}: mkdir {} failed: {}; create it yourself with `mkdir -p -m 700 {}` or "
            "set CUJIT_CACHE_DIR to a directory you own",
            dir.string(), prefix.string(), errno_text(err), dir.string()));
      }
      created = true;
      next = ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (next < 0) {
      const int err = errno;
      if (last && (err == ELOOP || err == ENOTDIR)) {
        errno = err;
        return -1;
      }
      throw CacheError(fmt::format(
          "cannot create cache directory {}: cannot open {}: {}; fix the permissions of that path or set "
          "CUJIT_CACHE_DIR to a directory you own",
          dir.string(), prefix.string(), errno_text(err)));
    }
    fd.reset(next);
  }
  return fd.release();
}

void create_dirs_0700(const std::filesystem::path& dir) {
  const int fd = open_dir_creating(dir, /*nofollow_last=*/false);
  if (fd < 0) {
    throw CacheError(fmt::format("cannot create directory {}: {}", dir.string(), errno_text(errno)));
  }
  ::close(fd);
}

std::optional<std::string> read_whole_regular_file(int fd, struct stat* st_out, std::uint64_t max_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (st_out != nullptr) *st_out = st;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return std::nullopt;
  std::string out;
  try {
    if (st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        return std::nullopt;
      }
      if (n == 0) break;
      if (out.size() + static_cast<std::size_t>(n) > max_bytes) return std::nullopt;  // grew while read
      out.append(buf, static_cast<std::size_t>(n));
    }
  } catch (...) {
    return std::nullopt;
  }
  return out;
}

}  // namespace jit::cache::detail
