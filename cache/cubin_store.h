// One file per compiled binary, named by its content key.
//
// Entry layout (little endian):
//   "CUJITCB\0" | u32 format version | u64 meta length | meta JSON |
//   u64 payload length | payload | 32-byte SHA-256 of everything before it.
// A reader verifies all of it (and that meta["key"] is the key asked for),
// then that the payload is a CUDA ELF image for meta["arch"]
// (cache/cubin_image.h); anything wrong is a miss, and the bad file is removed.
// Every directory on the way is opened through TrustedDir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cache/trusted_dir.h"

namespace jit::cache {

inline constexpr unsigned kCubinFormatVersion = 1;
// Larger entries are refused unread (a cubin is a few MiB at most).
inline constexpr std::uint64_t kMaxCubinEntryBytes = std::uint64_t{64} << 20;

struct CubinEntry {
  std::string payload;   // the cubin
  nlohmann::json meta;   // variant name, arch, lowered name, resource usage...
};

class CubinStore {
 public:
  explicit CubinStore(std::filesystem::path root);  // entries live in root/"cubin"; root opened per call
  explicit CubinStore(TrustedDir root);             // the same under a root already opened and checked

  // A miss (nullopt) for anything not servable: missing, corrupt, not a cubin
  // for its arch, or under a directory or in a file that is not trusted
  // (store refuses those loudly). A bad file is removed, except under a
  // read-only root (TrustedDir::read_only), which is never changed; there a
  // directory that is not trusted throws UntrustedCacheDir, as nothing else
  // would refuse it. `problem`, when given, says why an existing entry was
  // refused ("" for a hit or a plain miss).
  std::optional<CubinEntry> load(const std::string& key, std::string* problem = nullptr) const;
  // meta["key"] is set to `key` before writing. Throws CacheError when the
  // payload is not a cubin for meta["arch"] or the write fails, and
  // UntrustedCacheDir when a directory on the way is not trusted.
  void store(const std::string& key, std::string_view payload, nlohmann::json meta) const;
  std::filesystem::path entry_path(const std::string& key) const;

  // Encoding helpers, exposed for tests and tools. decode checks the
  // container (checksum, format, key); payload_problem the payload.
  static std::string encode(const std::string& key, std::string_view payload, nlohmann::json meta);
  static std::optional<CubinEntry> decode(const std::string& key, std::string_view bytes);
  // Why a decoded entry's payload may not be served ("" when it may): it must
  // be a CUDA ELF image for the SM of meta["arch"].
  static std::string payload_problem(const CubinEntry& entry);

 private:
  std::optional<TrustedDir> root_dir(bool create) const;
  std::filesystem::path root_;
  std::optional<TrustedDir> dir_;
};

}  // namespace jit::cache
