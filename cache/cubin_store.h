// One file per compiled binary, named by its content key.
//
// Entry layout (little endian):
//   "CUJITCB\0" | u32 format version | u64 meta length | meta JSON |
//   u64 payload length | payload | 32-byte SHA-256 of everything before it.
// A reader verifies all of it (and that meta["key"] is the key asked for);
// anything wrong is a miss, and the bad file is removed.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace jit::cache {

inline constexpr unsigned kCubinFormatVersion = 1;

struct CubinEntry {
  std::string payload;   // the cubin
  nlohmann::json meta;   // variant name, arch, lowered name, resource usage...
};

class CubinStore {
 public:
  explicit CubinStore(std::filesystem::path root);  // entries live in root/"cubin"

  std::optional<CubinEntry> load(const std::string& key) const;
  // meta["key"] is set to `key` before writing.
  void store(const std::string& key, std::string_view payload, nlohmann::json meta) const;
  std::filesystem::path entry_path(const std::string& key) const;

  // Encoding helpers, exposed for tests and tools.
  static std::string encode(const std::string& key, std::string_view payload, nlohmann::json meta);
  static std::optional<CubinEntry> decode(const std::string& key, std::string_view bytes);

 private:
  std::filesystem::path dir_;
};

}  // namespace jit::cache
