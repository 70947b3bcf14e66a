// Where the cache lives and whether it may be trusted.
#pragma once
#include <filesystem>

namespace jit::cache {

// $CUJIT_CACHE_DIR, else $XDG_CACHE_HOME/cujit, else $HOME/.cache/cujit.
std::filesystem::path default_cache_dir();

// Creates `dir` (and missing parents) with mode 0700. Throws CacheError with a
// message that says how to fix it when the directory (existing or created) is
// not a directory, is owned by another user, or is writable by group/others:
// a cache holds code that will run in this process.
void ensure_private_dir(const std::filesystem::path& dir);

}  // namespace jit::cache
