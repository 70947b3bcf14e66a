// Process-wide state shared by the call path: the cache root and counters.
#pragma once
#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/trusted_dir.h"

namespace jit::detail {

// Where compiled binaries and tuning records go, decided once per process.
struct CacheState {
  // The cache root (created 0700, owned by this user, writable); nullopt when
  // there is no disk cache.
  std::optional<std::filesystem::path> root;
  // The same root, open and checked (cache/trusted_dir.h): what every cache
  // access of this process goes through, so the root cannot be swapped after
  // the check.
  std::optional<cache::TrustedDir> root_dir;
  // What jit::cache_status() says: "disk: <path>", "off (CUJIT_DISK_CACHE=0)"
  // or "memory only: <reason>".
  std::string status;
};

// The cache state, resolved on first use. A root that cannot be created or
// written (permissions, read-only or full file system, no HOME, ...) is not an
// error: the process runs without a disk cache, as with CUJIT_DISK_CACHE=0,
// and says why once through the logger (info). A directory that exists but
// may not be trusted (a symbolic link, owned by another user, writable by
// group or others) throws Error(Cache) with the fix, on every call.
const CacheState& cache_state();

// CUJIT_CACHE_READONLY_DIRS, opened and checked on first use: pre-warmed
// roots consulted after the writable one, in order, never written (nor
// locked, evicted or repaired). Served even when the writable root is
// memory-only; none when CUJIT_DISK_CACHE=0. A root that is missing or cannot
// be read is left out and said once (info); one that is not trusted (a
// symbolic link, writable by group or others) throws Error(Cache) with the
// fix, on every call, as an untrusted writable root does.
const std::vector<cache::TrustedDir>& read_only_cache_roots();

// With no disk cache, for the errors of what needs one (a warm-up,
// cujit-cache) after cache_status(): "; unset CUJIT_DISK_CACHE ..." when it
// is off, "" when it is memory only (the status's reason says the fix).
std::string no_disk_cache_fix();

// cache_state().root.
const std::optional<std::filesystem::path>& cache_root();
// cache_state().root_dir.
const std::optional<cache::TrustedDir>& cache_root_dir();

struct Counters {
  std::atomic<long long> nvrtc_compiles{0};
  std::atomic<long long> disk_cache_hits{0};
  std::atomic<long long> tuning_runs{0};
  std::atomic<long long> tuning_db_hits{0};
};
Counters& counters();

// The library version, part of every cache key.
const char* cujit_version();

}  // namespace jit::detail
