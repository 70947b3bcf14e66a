#include "cache/trusted_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "cache/atomic_file.h"
#include "cache/cache_error.h"

namespace jit::cache {

namespace {

std::string mode_text(const struct stat& st) { return fmt::format("{:04o}", static_cast<unsigned>(st.st_mode & 07777)); }

// Why `st` is not ours and private ("" when it is): the owner and mode rules
// shared by directories and files.
std::string owner_mode_reason(const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return fmt::format("owned by uid {}, not by you (uid {})", static_cast<unsigned long>(st.st_uid),
                       static_cast<unsigned long>(me));
  }
  if ((st.st_mode & 022) != 0) return fmt::format("writable by group or others (mode {})", mode_text(st));
  return {};
}

// The rule for what a read-only root holds: owned by the root's owner, by
// root or by us (each could change the root anyway), writable by no one else.
std::string read_only_owner_mode_reason(const struct stat& st, uid_t root_owner) {
  const uid_t me = ::geteuid();
  if (st.st_uid != root_owner && st.st_uid != 0 && st.st_uid != me) {
    return fmt::format("owned by uid {}, not by the read-only root's owner (uid {}), root or you (uid {})",
                       static_cast<unsigned long>(st.st_uid), static_cast<unsigned long>(root_owner),
                       static_cast<unsigned long>(me));
  }
  if ((st.st_mode & 022) != 0) return fmt::format("writable by group or others (mode {})", mode_text(st));
  return {};
}

bool is_single_component(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos;
}

}  // namespace

std::string untrusted_dir_reason(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  return owner_mode_reason(st);
}

std::string untrusted_file_reason(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  return owner_mode_reason(st);
}

TrustedDir TrustedDir::open_root(const std::filesystem::path& root, bool create) {
  const std::string d = root.string();
  if (root.empty()) {
    throw CacheError("cache directory path is empty; set CUJIT_CACHE_DIR to a directory you own");
  }
  int fd = -1;
  if (create) {
    fd = detail::open_dir_creating(root, /*nofollow_last=*/true);
  } else {
    fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ELOOP && errno != ENOTDIR) {
      const int err = errno;
      throw CacheError(fmt::format("cannot open cache directory {}: {}; pass an existing cache directory or set "
                                   "CUJIT_CACHE_DIR to a directory you own",
                                   d, detail::errno_text(err)));
    }
  }
  if (fd < 0) {
    // ELOOP or ENOTDIR at the root itself: say which.
    struct stat lst {};
    if (::lstat(root.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      throw UntrustedCacheDir(fmt::format(
          "cache directory {} is a symbolic link, which is not trusted (the cache holds code that runs in this "
          "process); replace it with a real directory (`rm {} && mkdir -m 700 {}`) or set CUJIT_CACHE_DIR to a "
          "directory you own",
          d, d, d));
    }
    throw CacheError(fmt::format(
        "cache directory {} exists but is not a directory; remove or rename it, or set CUJIT_CACHE_DIR to a "
        "directory you own",
        d));
  }
  auto handle = std::make_shared<const detail::Fd>(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw CacheError(fmt::format("cache directory {} cannot be inspected: {}; fix its permissions or set "
                                 "CUJIT_CACHE_DIR to a directory you own",
                                 d, detail::errno_text(err)));
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    throw UntrustedCacheDir(fmt::format(
        "cache directory {} is owned by uid {}, not by you (uid {}); the cache holds code that runs in this "
        "process, so it must be yours: `chown {} {} && chmod 700 {}`, or set CUJIT_CACHE_DIR to a directory you own",
        d, static_cast<unsigned long>(st.st_uid), static_cast<unsigned long>(me), static_cast<unsigned long>(me), d,
        d));
  }
  if ((st.st_mode & 022) != 0) {
    throw UntrustedCacheDir(fmt::format(
        "cache directory {} is writable by group or others (mode {}); the cache holds code that runs in this "
        "process, so fix it with `chmod 700 {}` or set CUJIT_CACHE_DIR to a directory you own",
        d, mode_text(st), d));
  }
  return TrustedDir(std::move(handle), root, /*read_only=*/false, me);
}

TrustedDir TrustedDir::open_read_only_root(const std::filesystem::path& root) {
  const std::string d = root.string();
  if (root.empty()) throw CacheError("a read-only cache root path is empty");
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat lst {};
    const bool found = ::lstat(root.c_str(), &lst) == 0;
    if (found && S_ISLNK(lst.st_mode)) {
      throw UntrustedCacheDir(fmt::format(
          "read-only cache root {} is a symbolic link, which is not trusted (the cache holds code that runs in this "
          "process); name the directory it points to in CUJIT_CACHE_READONLY_DIRS instead",
          d));
    }
    if (found && !S_ISDIR(lst.st_mode)) {
      throw CacheError(fmt::format("read-only cache root {} is not a directory; fix CUJIT_CACHE_READONLY_DIRS", d));
    }
    throw CacheError(fmt::format("cannot open read-only cache root {}: {}; it must exist and be readable and "
                                 "searchable by you (`chmod -R a+rX {}` where it was filled)",
                                 d, detail::errno_text(err), d));
  }
  auto handle = std::make_shared<const detail::Fd>(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw CacheError(fmt::format("read-only cache root {} cannot be inspected: {}", d, detail::errno_text(err)));
  }
  // Another owner is fine (a root-owned image layer read by a service user);
  // a mode that lets anyone else write is not.
  if ((st.st_mode & 022) != 0) {
    throw UntrustedCacheDir(fmt::format(
        "read-only cache root {} is writable by group or others (mode {}); whoever can write it can change the code "
        "this process runs, so fix it with `chmod -R go-w {}` or remove it from CUJIT_CACHE_READONLY_DIRS",
        d, mode_text(st), d));
  }
  return TrustedDir(std::move(handle), root, /*read_only=*/true, st.st_uid);
}

TrustedDir TrustedDir::open_existing_root(const std::filesystem::path& root, RootAccess access) {
  return access == RootAccess::read_only ? open_read_only_root(root) : open_root(root, /*create=*/false);
}

std::string TrustedDir::untrusted_reason(const struct stat& st, bool directory) const {
  if (!read_only_) return directory ? untrusted_dir_reason(st) : untrusted_file_reason(st);
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (directory && !S_ISDIR(st.st_mode)) return "not a directory";
  if (!directory && !S_ISREG(st.st_mode)) return "not a regular file";
  return read_only_owner_mode_reason(st, owner_);
}

std::optional<TrustedDir> TrustedDir::open_subdir(std::string_view relative, bool create) const {
  TrustedDir dir = *this;
  std::size_t pos = 0;
  while (pos <= relative.size()) {
    const std::size_t slash = std::min(relative.find('/', pos), relative.size());
    const std::string name(relative.substr(pos, slash - pos));
    pos = slash + 1;
    if (!is_single_component(name)) {
      throw CacheError(fmt::format("'{}' is not a path inside the cache; this is a bug in the caller", relative));
    }
    const std::filesystem::path shown = dir.path_ / name;
    int fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      if (!create) return std::nullopt;
      if (read_only_) {
        throw CacheError(fmt::format("cannot create {}: it is in a read-only cache root", shown.string()));
      }
      if (::mkdirat(dir.fd(), name.c_str(), 0700) != 0 && errno != EEXIST) {
        const int err = errno;
        throw CacheError(fmt::format("cannot create cache directory {}: {}; check that the disk is not full and the "
                                     "cache is writable by you",
                                     shown.string(), detail::errno_text(err)));
      }
      fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    struct stat st {};
    if (fd < 0) {
      const int err = errno;
      const bool found = (err == ELOOP || err == ENOTDIR) &&
                         ::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      if (found && S_ISREG(st.st_mode) && untrusted_reason(st, /*directory=*/false).empty()) {
        // Our own file where a directory belongs: a broken cache, not an attack.
        throw CacheError(fmt::format("cannot use cache directory {}: a file is in its place; remove it (cujit "
                                     "creates the directory again)",
                                     shown.string()));
      }
      if (found && read_only_) {
        throw UntrustedCacheDir(fmt::format(
            "directory {} of a read-only cache root is {}, which is not trusted (the cache holds code that runs in "
            "this process); fix the root or remove it from CUJIT_CACHE_READONLY_DIRS",
            shown.string(), untrusted_reason(st, /*directory=*/true)));
      }
      if (found) {
        throw UntrustedCacheDir(fmt::format(
            "cache directory {} is {}, which is not trusted (the cache holds code that runs in this process); "
            "remove it (`rm -rf {}`): cujit creates it again",
            shown.string(), untrusted_dir_reason(st), shown.string()));
      }
      throw CacheError(fmt::format("cannot open cache directory {}: {}", shown.string(), detail::errno_text(err)));
    }
    auto handle = std::make_shared<const detail::Fd>(fd);
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      throw CacheError(fmt::format("cannot inspect cache directory {}: {}", shown.string(), detail::errno_text(err)));
    }
    if (const std::string why = untrusted_reason(st, /*directory=*/true); !why.empty() && read_only_) {
      throw UntrustedCacheDir(fmt::format(
          "directory {} of a read-only cache root is {}, which is not trusted (the cache holds code that runs in "
          "this process); fix it with `chmod -R go-w {}` (and give it to the root's owner), or remove the root from "
          "CUJIT_CACHE_READONLY_DIRS",
          shown.string(), why, shown.string()));
    } else if (!why.empty()) {
      throw UntrustedCacheDir(fmt::format(
          "cache directory {} is {}, which is not trusted (the cache holds code that runs in this process); fix it "
          "with `chown $(id -u) {} && chmod 700 {}`, or remove it (`rm -rf {}`): cujit creates it again",
          shown.string(), why, shown.string(), shown.string(), shown.string()));
    }
    dir = TrustedDir(std::move(handle), shown, read_only_, owner_);
  }
  return dir;
}

std::optional<TrustedDir::File> TrustedDir::read_file(std::string_view name, std::uint64_t max_bytes,
                                                      std::string* problem) const {
  if (problem != nullptr) problem->clear();
  if (!is_single_component(name)) return std::nullopt;
  // O_NONBLOCK: a FIFO planted at the name must not hang the reader.
  const int raw = ::openat(fd(), std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (raw < 0) {
    if (problem != nullptr && errno == ELOOP) *problem = "a symbolic link";
    return std::nullopt;
  }
  detail::Fd file(raw);
  File out;
  if (::fstat(file.get(), &out.st) != 0) return std::nullopt;
  if (const std::string why = untrusted_reason(out.st, /*directory=*/false); !why.empty()) {
    if (problem != nullptr) *problem = why;
    return std::nullopt;
  }
  std::optional<std::string> bytes = detail::read_whole_regular_file(file.get(), &out.st, max_bytes);
  if (!bytes) return std::nullopt;
  out.bytes = std::move(*bytes);
  return out;
}

void TrustedDir::write_file(std::string_view name, std::string_view bytes) const {
  if (read_only_) {
    throw CacheError(fmt::format("cannot write {}: it is in a read-only cache root", (path_ / name).string()));
  }
  write_file_atomic_at(fd(), std::string(name), bytes, (path_ / name).string());
}

std::optional<struct stat> TrustedDir::stat_entry(std::string_view name) const {
  struct stat st {};
  if (!is_single_component(name)) return std::nullopt;
  if (::fstatat(fd(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return st;
}

bool TrustedDir::unlink(std::string_view name) const {
  return !read_only_ && is_single_component(name) && ::unlinkat(fd(), std::string(name).c_str(), 0) == 0;
}

std::vector<std::string> TrustedDir::list() const {
  std::vector<std::string> names;
  // fdopendir takes over the descriptor it is given: hand it a duplicate.
  const int dup = ::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return names;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace jit::cache
