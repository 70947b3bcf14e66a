#include "cache/cache_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include <fmt/format.h>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {

namespace {

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_hex_name(std::string_view name, std::string_view suffix) {
  return name.size() == 64 + suffix.size() && name.ends_with(suffix) && is_lower_hex(name.substr(0, 64));
}

// ".<name>.tmp.<pid>.<hex>" as write_file_atomic names its temp files.
bool is_temp_name(std::string_view name) {
  return name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string_view::npos;
}

FileIdentity identity_of(const struct stat& st) {
  FileIdentity id;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.size = st.st_size > 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return id;
}

void add_file(CacheScan& scan, const TrustedDir& dir, const std::string& name, std::string relative,
              const std::function<void(const std::filesystem::path&)>& before_stat) {
  const std::filesystem::path path = dir.path() / name;
  if (before_stat) before_stat(path);
  const std::optional<struct stat> st = dir.stat_entry(name);
  if (!st) return;                     // vanished (or unreadable): skip it
  if (S_ISDIR(st->st_mode)) return;    // stray directory: not a file of the cache
  CacheFile f;
  f.path = path;
  f.kind = classify_relative_path(relative);
  f.relative = std::move(relative);
  f.regular = S_ISREG(st->st_mode);
  f.id = identity_of(*st);
  f.dir = dir;
  f.name = name;
  if (f.regular) scan.total_bytes += f.id.size;
  scan.files.push_back(std::move(f));
}

// `relative` under `parent`, or nullopt (noted in scan.untrusted when it is
// there but not trusted; missing is just empty).
std::optional<TrustedDir> open_checked(CacheScan& scan, const TrustedDir& parent, const std::string& name,
                                       const std::string& relative) {
  try {
    return parent.open_subdir(name, /*create=*/false);
  } catch (const UntrustedCacheDir& e) {
    scan.untrusted.push_back({relative, e.what()});
  } catch (const CacheError&) {
    // Unreadable, or our own file where a directory belongs: nothing to list.
  }
  return std::nullopt;
}

}  // namespace

CacheFileKind classify_relative_path(std::string_view relative) {
  // cubin/xx/<name> or tuning/<name>, nothing else.
  std::string_view name;
  if (relative.starts_with("cubin/")) {
    const std::string_view rest = relative.substr(6);
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) return CacheFileKind::other;
    const std::string_view shard = rest.substr(0, slash);
    name = rest.substr(slash + 1);
    if (name.find('/') != std::string_view::npos) return CacheFileKind::other;
    if (is_temp_name(name)) return CacheFileKind::temp;
    if (shard.size() == 2 && is_lower_hex(shard) && is_hex_name(name, ".cubin") && name.substr(0, 2) == shard) {
      return CacheFileKind::cubin;
    }
    return CacheFileKind::other;
  }
  if (relative.starts_with("tuning/")) {
    name = relative.substr(7);
    if (name.find('/') != std::string_view::npos) return CacheFileKind::other;
    if (is_temp_name(name)) return CacheFileKind::temp;
    if (is_hex_name(name, ".json")) return CacheFileKind::tuning;
  }
  return CacheFileKind::other;
}

bool is_entry_relative_path(std::string_view relative) {
  const CacheFileKind kind = classify_relative_path(relative);
  return kind == CacheFileKind::cubin || kind == CacheFileKind::tuning;
}

std::string entry_hex_name(std::string_view relative) {
  if (!is_entry_relative_path(relative)) return {};
  const auto slash = relative.rfind('/');
  return std::string(relative.substr(slash + 1, 64));
}

CacheScan scan_cache(const std::filesystem::path& root,
                     const std::function<void(const std::filesystem::path&)>& before_stat, RootAccess access) {
  CacheScan scan;
  scan.root = root;
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0 && errno == ENOENT) return scan;  // no cache yet: nothing in it
  const TrustedDir top = TrustedDir::open_existing_root(root, access);
  if (const std::optional<TrustedDir> cubin = open_checked(scan, top, "cubin", "cubin")) {
    for (const std::string& shard : cubin->list()) {
      const std::optional<struct stat> sst = cubin->stat_entry(shard);
      if (!sst) continue;
      if (!S_ISDIR(sst->st_mode) && !S_ISLNK(sst->st_mode)) {  // a file directly in cubin/
        add_file(scan, *cubin, shard, "cubin/" + shard, before_stat);
        continue;
      }
      const std::optional<TrustedDir> dir = open_checked(scan, *cubin, shard, "cubin/" + shard);
      if (!dir) continue;
      for (const std::string& name : dir->list()) add_file(scan, *dir, name, "cubin/" + shard + "/" + name, before_stat);
    }
  }
  if (const std::optional<TrustedDir> tuning = open_checked(scan, top, "tuning", "tuning")) {
    for (const std::string& name : tuning->list()) add_file(scan, *tuning, name, "tuning/" + name, before_stat);
  }
  std::sort(scan.files.begin(), scan.files.end(),
            [](const CacheFile& a, const CacheFile& b) { return a.relative < b.relative; });
  return scan;
}

void refuse_untrusted(const CacheScan& scan) {
  if (!scan.untrusted.empty()) {
    throw UntrustedCacheDir(fmt::format("{}; nothing was changed", scan.untrusted.front().reason));
  }
}

std::optional<FileContents> read_file_with_identity(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO planted at the path must not hang the reader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> bytes = detail::read_whole_regular_file(fd, &st);
  ::close(fd);
  if (!bytes) return std::nullopt;
  return FileContents{std::move(*bytes), identity_of(st)};
}

std::optional<FileContents> read_file_with_identity(const CacheFile& file, std::uint64_t max_bytes,
                                                    std::string* problem) {
  if (problem != nullptr) problem->clear();
  if (!file.dir) return std::nullopt;
  std::optional<TrustedDir::File> read = file.dir->read_file(file.name, max_bytes, problem);
  if (!read) return std::nullopt;
  return FileContents{std::move(read->bytes), identity_of(read->st)};
}

RemoveResult remove_if_unchanged(const CacheFile& file, const FileIdentity& expected) {
  if (!file.dir) return RemoveResult::failed;
  const std::optional<struct stat> st = file.dir->stat_entry(file.name);
  if (!st) return errno == ENOENT ? RemoveResult::vanished : RemoveResult::failed;
  if (!(identity_of(*st) == expected)) return RemoveResult::changed;
  if (!file.dir->unlink(file.name)) return errno == ENOENT ? RemoveResult::vanished : RemoveResult::failed;
  return RemoveResult::removed;
}

bool touch_entry(const std::filesystem::path& path) {
  return ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0;
}

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace jit::cache
