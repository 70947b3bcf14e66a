#include "cache/eviction.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <limits>
#include <string>

#include "cache/cache_error.h"
#include "cache/trusted_dir.h"

namespace jit::cache {

namespace {

// Holds root/.eviction.lock while alive; busy() when another process holds it.
class EvictionLock {
 public:
  explicit EvictionLock(const std::filesystem::path& root) {
    try {
      const TrustedDir dir = TrustedDir::open_root(root, /*create=*/false);
      fd_ = ::openat(dir.fd(), ".eviction.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    } catch (const CacheError&) {
      fd_ = -1;
    }
    if (fd_ < 0) return;  // no lock possible (no dir, read-only): evict without it
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      busy_ = (errno == EWOULDBLOCK);
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~EvictionLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  EvictionLock(const EvictionLock&) = delete;
  EvictionLock& operator=(const EvictionLock&) = delete;
  bool busy() const { return busy_; }

 private:
  int fd_ = -1;
  bool busy_ = false;
};

bool kept(const EvictionOptions& options, const std::filesystem::path& path) {
  return std::find(options.keep.begin(), options.keep.end(), path) != options.keep.end();
}

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (kMax - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return std::nullopt;  // no digits (empty, sign, space, ...)
  std::string suffix;
  for (char c : text.substr(i)) suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  int shift = 0;
  if (!suffix.empty() && suffix != "b") {
    switch (suffix[0]) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: return std::nullopt;
    }
    const std::string_view unit = std::string_view(suffix).substr(1);
    if (!(unit.empty() || unit == "b" || unit == "ib")) return std::nullopt;
  }
  if (shift > 0 && value > (kMax >> shift)) return std::nullopt;
  return value << shift;
}

std::uint64_t eviction_target(std::uint64_t max_bytes) { return max_bytes - max_bytes / 10; }

EvictionReport evict_from_scan(const CacheScan& scan, std::uint64_t max_bytes, const EvictionOptions& options) {
  EvictionReport report;
  report.bytes_before = scan.total_bytes;
  std::uint64_t total = scan.total_bytes;
  const std::int64_t now = options.now_ns != 0 ? options.now_ns : now_ns();

  auto account = [&](const CacheFile& f, RemoveResult result) {
    switch (result) {
      case RemoveResult::removed:
        total -= std::min(total, f.id.size);
        report.removed_bytes += f.id.size;
        return true;
      case RemoveResult::vanished:
        total -= std::min(total, f.id.size);
        ++report.vanished;
        return false;
      case RemoveResult::changed:
        ++report.skipped_changed;
        return false;
      case RemoveResult::failed:
        return false;
    }
    return false;
  };

  // Temp files whose writer is long gone (a crash between create and rename).
  for (const CacheFile& f : scan.files) {
    if (f.kind != CacheFileKind::temp || !f.regular) continue;
    if (now - f.id.mtime_ns < kStaleTempAgeNs) continue;  // a live writer's: never touched
    if (account(f, remove_if_unchanged(f, f.id))) ++report.removed_temps;
  }

  if (total > max_bytes) {
    report.evicted = true;
    const std::uint64_t target = eviction_target(max_bytes);
    for (CacheFileKind kind : {CacheFileKind::cubin, CacheFileKind::tuning}) {
      if (total <= target) break;
      std::vector<const CacheFile*> candidates;
      for (const CacheFile& f : scan.files) {
        if (f.kind == kind && f.regular && !kept(options, f.path)) candidates.push_back(&f);
      }
      std::sort(candidates.begin(), candidates.end(), [](const CacheFile* a, const CacheFile* b) {
        if (a->id.mtime_ns != b->id.mtime_ns) return a->id.mtime_ns < b->id.mtime_ns;
        return a->relative < b->relative;
      });
      for (const CacheFile* f : candidates) {
        if (total <= target) break;
        if (account(*f, remove_if_unchanged(*f, f->id))) {
          if (kind == CacheFileKind::cubin) ++report.removed_cubins;
          else ++report.removed_tuning;
        }
      }
    }
  }
  report.bytes_after = total;
  return report;
}

EvictionReport evict_lru(const std::filesystem::path& root, std::uint64_t max_bytes, const EvictionOptions& options) {
  // The common case (under the bound, no stale temp file) takes no lock and
  // creates no file.
  CacheScan scan = scan_cache(root);
  const std::int64_t now = options.now_ns != 0 ? options.now_ns : now_ns();
  const bool stale_temps = std::any_of(scan.files.begin(), scan.files.end(), [&](const CacheFile& f) {
    return f.kind == CacheFileKind::temp && f.regular && now - f.id.mtime_ns >= kStaleTempAgeNs;
  });
  if (scan.total_bytes <= max_bytes && !stale_temps) {
    EvictionReport report;
    report.bytes_before = report.bytes_after = scan.total_bytes;
    return report;
  }
  std::optional<EvictionLock> lock;
  if (options.lock) {
    lock.emplace(root);
    if (lock->busy()) {
      EvictionReport report;
      report.bytes_before = report.bytes_after = scan.total_bytes;
      report.lock_busy = true;
      return report;
    }
    scan = scan_cache(root);  // what the previous holder left
  }
  return evict_from_scan(scan, max_bytes, options);
}

}  // namespace jit::cache
