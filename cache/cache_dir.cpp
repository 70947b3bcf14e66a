#include "cache/cache_dir.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "cache/cache_error.h"
#include "cache/trusted_dir.h"

namespace jit::cache {

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

void ensure_private_dir(const std::filesystem::path& dir) { (void)TrustedDir::open_root(dir, /*create=*/true); }

}  // namespace jit::cache
