#include "jit/runtime_state.h"

#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/log.h"

namespace jit::detail {

const std::optional<std::filesystem::path>& cache_root() {
  static const std::optional<std::filesystem::path> root = []() -> std::optional<std::filesystem::path> {
    if (!knobs().disk_cache) return std::nullopt;
    try {
      std::filesystem::path dir = cache::default_cache_dir();
      cache::ensure_private_dir(dir);
      log_info("cache directory: {}", dir.string());
      return dir;
    } catch (const cache::CacheError& e) {
      throw Error(ErrorCode::Cache, e.what());
    }
  }();
  return root;
}

Counters& counters() {
  static Counters counters;
  return counters;
}

const char* cujit_version() { return CUJIT_VERSION; }

}  // namespace jit::detail
