#include "jit/runtime_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "cache/cache_dir.h"
#include "cache/trusted_dir.h"
#include "cache/cache_error.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "jit/knobs.h"
#include "jit/log.h"

namespace jit {
namespace detail {
namespace {

CacheState resolve_cache_state() {
  CacheState state;
  if (!knobs().disk_cache) {
    state.status = "off (CUJIT_DISK_CACHE=0)";
    return state;
  }
  std::filesystem::path dir;
  std::optional<cache::TrustedDir> handle;
  try {
    dir = cache::default_cache_dir();
    handle = cache::TrustedDir::open_root(dir, /*create=*/true);
    // Ours and private, but a read-only mount (EROFS) or a mode without the
    // write bit would fail every store: better no disk cache at all.
    if (::faccessat(handle->fd(), ".", R_OK | W_OK | X_OK, AT_EACCESS) != 0) {
      const int err = errno;
      throw cache::CacheError(fmt::format("cache directory {} is not writable: {}; make it writable or set "
                                          "CUJIT_CACHE_DIR to a directory you own",
                                          dir.string(), std::generic_category().message(err)));
    }
  } catch (const cache::UntrustedCacheDir& e) {
    // A security problem: refuse, never carry on without a word.
    throw Error(ErrorCode::Cache, e.what());
  } catch (const cache::CacheError& e) {
    state.status = std::string("memory only: ") + e.what();
    log_info("no disk cache, compiled kernels and tuning results are kept in memory only: {}", e.what());
    return state;
  }
  state.status = "disk: " + dir.string();
  state.root = std::move(dir);
  state.root_dir = std::move(handle);
  log_info("cache directory: {}", state.root->string());
  return state;
}

std::vector<cache::TrustedDir> resolve_read_only_roots() {
  std::vector<cache::TrustedDir> roots;
  if (!knobs().disk_cache) return roots;
  for (const std::filesystem::path& dir : knobs().cache_read_only_dirs) {
    try {
      roots.push_back(cache::TrustedDir::open_read_only_root(dir));
      log_info("read-only cache root: {}", dir.string());
    } catch (const cache::UntrustedCacheDir& e) {
      throw Error(ErrorCode::Cache, e.what());
    } catch (const cache::CacheError& e) {
      log_info("read-only cache root left out: {}", e.what());
    }
  }
  return roots;
}

}  // namespace

const std::vector<cache::TrustedDir>& read_only_cache_roots() {
  // An exception (untrusted root) leaves it unset: the next call checks again.
  static const std::vector<cache::TrustedDir> roots = resolve_read_only_roots();
  return roots;
}

const CacheState& cache_state() {
  // An exception (untrusted directory) leaves it unset: the next call checks again.
  static const CacheState state = resolve_cache_state();
  return state;
}

const std::optional<std::filesystem::path>& cache_root() { return cache_state().root; }

const std::optional<cache::TrustedDir>& cache_root_dir() { return cache_state().root_dir; }

Counters& counters() {
  static Counters counters;
  return counters;
}

const char* cujit_version() { return CUJIT_VERSION; }

std::string no_disk_cache_fix() {
  // "memory only: <reason>" says what to fix already.
  return knobs().disk_cache ? "" : "; unset CUJIT_DISK_CACHE (or set it to 1)";
}

}  // namespace detail

std::string cache_status() {
  std::string status = detail::cache_state().status;
  for (const cache::TrustedDir& root : detail::read_only_cache_roots()) status += "; read-only: " + root.path().string();
  return status;
}

}  // namespace jit
