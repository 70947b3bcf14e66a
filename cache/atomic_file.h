// Whole-file writes that readers never see half done: temp file + fsync + rename.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace jit::cache {

// Writes `bytes` to a unique temp file beside `path`, then renames it over
// `path`. Throws CacheError on any failure (the temp file is removed).
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Reads a regular file whole; nullopt if it is missing, not a regular file
// (a symlink is refused), or unreadable.
std::optional<std::string> read_regular_file(const std::filesystem::path& path);

}  // namespace jit::cache
