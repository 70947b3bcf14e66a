#include "cache/cache_dir.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {

namespace detail {

std::string errno_text(int err) { return std::generic_category().message(err); }

void create_dirs_0700(const std::filesystem::path& dir) {
  if (dir.empty()) {
    throw CacheError(
        "cache directory path is empty; set CUJIT_CACHE_DIR to a directory you own");
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
  std::filesystem::path prefix;
  for (const auto& part : dir) {
    if (part.empty()) continue;  // trailing separator
    prefix /= part;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0) continue;  // exists: leave it alone
    int err = errno;
    if (err != ENOENT) {
      throw CacheError(fmt::format(
          "cannot create cache directory {}: cannot inspect {}: {}; fix the permissions of "
          "that path or set CUJIT_CACHE_DIR to a directory you own",
          dir.string(), prefix.string(), errno_text(err)));
    }
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      err = errno;
      throw CacheError(fmt::format(
          "cannot create cache directory {}: mkdir {} failed: {}; create it yourself with "
          "`mkdir -p -m 700 {}` or set CUJIT_CACHE_DIR to a directory you own",
          dir.string(), prefix.string(), errno_text(err), dir.string()));
    }
  }
}

}  // namespace detail

namespace {

const char* env_nonempty(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const char* d = env_nonempty("CUJIT_CACHE_DIR")) return std::filesystem::path(d);
  if (const char* x = env_nonempty("XDG_CACHE_HOME")) return std::filesystem::path(x) / "cujit";
  if (const char* h = env_nonempty("HOME")) return std::filesystem::path(h) / ".cache" / "cujit";
  throw CacheError(
      "cannot choose a cache directory: CUJIT_CACHE_DIR, XDG_CACHE_HOME and HOME are all "
      "unset or empty; set CUJIT_CACHE_DIR to a directory you own");
}

void ensure_private_dir(const std::filesystem::path& dir) {
  detail::create_dirs_0700(dir);

  const std::string d = dir.string();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    int err = errno;
    throw CacheError(fmt::format(
        "cache directory {} cannot be inspected: {}; fix its permissions or set "
        "CUJIT_CACHE_DIR to a directory you own",
        d, detail::errno_text(err)));
  }
  if (S_ISLNK(st.st_mode)) {
    throw UntrustedCacheDir(fmt::format(
        "cache directory {} is a symbolic link, which is not trusted (the cache holds code "
        "that runs in this process); replace it with a real directory (`rm {} && mkdir -m "
        "700 {}`) or set CUJIT_CACHE_DIR to a directory you own",
        d, d, d));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw CacheError(fmt::format(
        "cache directory {} exists but is not a directory; remove or rename it, or set "
        "CUJIT_CACHE_DIR to a directory you own",
        d));
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    throw UntrustedCacheDir(fmt::format(
        "cache directory {} is owned by uid {}, not by you (uid {}); the cache holds code "
        "that runs in this process, so it must be yours: `chown {} {} && chmod 700 {}`, or "
        "set CUJIT_CACHE_DIR to a directory you own",
        d, static_cast<unsigned long>(st.st_uid), static_cast<unsigned long>(me),
        static_cast<unsigned long>(me), d, d));
  }
  if ((st.st_mode & 022) != 0) {
    throw UntrustedCacheDir(fmt::format(
        "cache directory {} is writable by group or others (mode {:04o}); the cache holds "
        "code that runs in this process, so fix it with `chmod 700 {}` or set "
        "CUJIT_CACHE_DIR to a directory you own",
        d, static_cast<unsigned>(st.st_mode & 07777), d));
  }
}

}  // namespace jit::cache
