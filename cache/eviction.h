// Size bound for the cache: least-recently-used eviction over a directory.
//
// The size is the total of the regular files under cubin/ and tuning/. When it
// is over the bound, cubin entries are removed oldest use first (use = file
// mtime, refreshed by touch_entry on every hit) until the total is at most 90%
// of the bound; tuning records are small and removed only when cubins alone
// cannot make enough room. Safe with other processes reading and writing the
// same directory: a reader that loses the race sees a miss, an entry used or
// rewritten since the scan is left alone, and a writer's temp file is removed
// only once it is over an hour old (its writer is gone).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "cache/cache_scan.h"

namespace jit::cache {

inline constexpr std::uint64_t kDefaultCacheMaxBytes = std::uint64_t{4} << 30;  // 4 GiB
inline constexpr std::int64_t kStaleTempAgeNs = std::int64_t{3600} * 1'000'000'000;  // 1 hour

// "123" (bytes), "512K", "512M", "4G", "1T" (binary multiples, either case,
// an optional trailing "B" or "iB": "4GiB", "512MB"). nullopt for anything
// else, or for a value that does not fit 64 bits.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// The bound eviction brings the total down to: 90% of max_bytes.
std::uint64_t eviction_target(std::uint64_t max_bytes);

struct EvictionOptions {
  // Entries never removed (e.g. the one just stored), as absolute paths.
  std::vector<std::filesystem::path> keep;
  // "Now" for the age of temp files; 0 means the current time.
  std::int64_t now_ns = 0;
  // When there is work to do, take root/.eviction.lock (flock) so that two
  // processes do not both evict for the same excess; when another process
  // holds it, return at once (it is bringing the total down). evict_lru only.
  bool lock = true;
};

struct EvictionReport {
  std::uint64_t bytes_before = 0;     // total at the scan
  std::uint64_t bytes_after = 0;      // total after removals (by the scan's sizes)
  std::uint64_t removed_bytes = 0;
  std::size_t removed_cubins = 0;
  std::size_t removed_tuning = 0;
  std::size_t removed_temps = 0;      // stale temp files (over an hour old)
  std::size_t skipped_changed = 0;    // used or rewritten since the scan: kept
  std::size_t vanished = 0;           // removed by someone else meanwhile
  bool evicted = false;               // the total was over the bound
  bool lock_busy = false;             // another process was evicting; nothing done
};

// Scans root and evicts as described above when the total exceeds max_bytes.
// Stale temp files are removed whenever they are seen. Never throws for
// files that vanish or cannot be removed (they are counted or skipped).
EvictionReport evict_lru(const std::filesystem::path& root, std::uint64_t max_bytes,
                         const EvictionOptions& options = {});

// The same over a scan taken earlier (files it lists may be gone by now).
EvictionReport evict_from_scan(const CacheScan& scan, std::uint64_t max_bytes,
                               const EvictionOptions& options = {});

}  // namespace jit::cache
