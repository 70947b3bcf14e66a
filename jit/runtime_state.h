// Process-wide state shared by the call path: the cache root and counters.
#pragma once
#include <atomic>
#include <filesystem>
#include <optional>

namespace jit::detail {

// The cache root, created and checked once (0700, owned by this user).
// nullopt when CUJIT_DISK_CACHE=0. Throws Error(Cache) with the fix when the
// directory may not be trusted.
const std::optional<std::filesystem::path>& cache_root();

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
