// A whole file's bytes, read or written in one call (binary mode), for tests
// that plant, corrupt or check files on disk. Neither throws: slurp returns
// "" for a file it cannot open; spit replaces the file's contents, and a
// failed write leaves nothing to check but the file itself.
#pragma once
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace cujit_test {

// The bytes of `path`; "" when it cannot be opened (missing, unreadable).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Creates or truncates `path` and writes `bytes` to it.
inline void spit(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace cujit_test
