// Where the cache lives and whether it may be trusted.
#pragma once
#include <filesystem>

#include "cache/cache_error.h"

namespace jit::cache {

// ensure_private_dir's refusal of a directory that exists but may not be
// trusted (a symbolic link, owned by another user, writable by group or
// others): a security problem, never a reason to carry on without the cache.
// Every other CacheError of these functions (cannot create, not a directory,
// no HOME) is about a cache that cannot be used, and a caller may go on
// without it.
class UntrustedCacheDir : public CacheError {
 public:
  using CacheError::CacheError;
};

// $CUJIT_CACHE_DIR, else $XDG_CACHE_HOME/cujit, else $HOME/.cache/cujit.
std::filesystem::path default_cache_dir();

// Creates `dir` (and missing parents) with mode 0700. Throws CacheError with a
// message that says how to fix it when the directory cannot be created or is
// not a directory, and UntrustedCacheDir when it is a symbolic link, is owned
// by another user, or is writable by group/others: a cache holds code that
// will run in this process.
void ensure_private_dir(const std::filesystem::path& dir);

}  // namespace jit::cache
