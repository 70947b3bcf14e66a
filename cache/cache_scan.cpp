#include "cache/cache_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

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

// Names in one directory ("." and ".." left out); empty when it cannot be read.
std::vector<std::string> list_dir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void add_file(CacheScan& scan, const std::filesystem::path& path, std::string relative,
              const std::function<void(const std::filesystem::path&)>& before_stat) {
  if (before_stat) before_stat(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // vanished (or unreadable): skip it
  if (S_ISDIR(st.st_mode)) return;              // stray directory: not a file of the cache
  CacheFile f;
  f.path = path;
  f.kind = classify_relative_path(relative);
  f.relative = std::move(relative);
  f.regular = S_ISREG(st.st_mode);
  f.id = identity_of(st);
  if (f.regular) scan.total_bytes += f.id.size;
  scan.files.push_back(std::move(f));
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
                     const std::function<void(const std::filesystem::path&)>& before_stat) {
  CacheScan scan;
  scan.root = root;
  const std::filesystem::path cubin_dir = root / "cubin";
  for (const std::string& shard : list_dir(cubin_dir)) {
    const std::filesystem::path shard_path = cubin_dir / shard;
    struct stat st {};
    if (::lstat(shard_path.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {  // a file (or symlink) directly in cubin/
      add_file(scan, shard_path, "cubin/" + shard, before_stat);
      continue;
    }
    for (const std::string& name : list_dir(shard_path)) {
      add_file(scan, shard_path / name, "cubin/" + shard + "/" + name, before_stat);
    }
  }
  const std::filesystem::path tuning_dir = root / "tuning";
  for (const std::string& name : list_dir(tuning_dir)) {
    add_file(scan, tuning_dir / name, "tuning/" + name, before_stat);
  }
  std::sort(scan.files.begin(), scan.files.end(),
            [](const CacheFile& a, const CacheFile& b) { return a.relative < b.relative; });
  return scan;
}

std::optional<FileContents> read_file_with_identity(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO planted at the path must not hang the reader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  FileContents out;
  out.id = identity_of(st);
  try {
    out.bytes.reserve(out.id.size);
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        ::close(fd);
        return std::nullopt;
      }
      if (n == 0) break;
      out.bytes.append(buf, static_cast<std::size_t>(n));
    }
  } catch (...) {
    ::close(fd);
    return std::nullopt;
  }
  ::close(fd);
  return out;
}

RemoveResult remove_if_unchanged(const std::filesystem::path& path, const FileIdentity& expected) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? RemoveResult::vanished : RemoveResult::failed;
  if (!(identity_of(st) == expected)) return RemoveResult::changed;
  if (::unlink(path.c_str()) != 0) return errno == ENOENT ? RemoveResult::vanished : RemoveResult::failed;
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
