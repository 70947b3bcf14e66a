// Private helpers shared by the cache sources; not part of the public API.
#pragma once
#include <filesystem>
#include <string>

namespace jit::cache::detail {

// Creates each missing component of `dir` with ::mkdir(..., 0700); components
// that already exist are left alone. Throws CacheError on failure. Does not
// check ownership or mode (ensure_private_dir does that for the final dir).
void create_dirs_0700(const std::filesystem::path& dir);

// Text for an errno value (thread-safe).
std::string errno_text(int err);

}  // namespace jit::cache::detail
