// What `cujit-cache` does, as library functions over a cache directory:
// list, summarize, verify and clear. Nothing here needs a GPU or cuda.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_scan.h"

namespace jit::cache {

// One cubin entry as `cujit-cache ls` shows it.
struct CubinInfo {
  std::string relative;       // cubin/ab/<key>.cubin
  std::string key;
  std::uint64_t bytes = 0;
  std::int64_t last_use_ns = 0;  // mtime
  bool valid = false;         // decodes (checksum, format, key)
  std::string variant;        // from the metadata; "" when invalid
  std::string arch;
  std::string family;
};

// Every cubin entry, decoded to read its metadata (sorted by path).
std::vector<CubinInfo> list_cubins(const std::filesystem::path& root, RootAccess access = RootAccess::writable);

struct ArchStats {
  std::size_t cubins = 0;
  std::uint64_t cubin_bytes = 0;
  std::size_t tuning_records = 0;
};

struct CacheStats {
  std::size_t cubins = 0;
  std::uint64_t cubin_bytes = 0;
  std::size_t invalid_cubins = 0;       // counted in cubins; their arch is "(invalid)"
  std::size_t tuning_records = 0;
  std::uint64_t tuning_bytes = 0;
  std::size_t temp_files = 0;
  std::uint64_t total_bytes = 0;        // every regular file under cubin/ and tuning/
  std::map<std::string, ArchStats> by_arch;
  std::vector<UntrustedSubtree> untrusted;  // directories not listed (see scan_cache)
};

CacheStats cache_stats(const std::filesystem::path& root, RootAccess access = RootAccess::writable);

struct BadEntry {
  std::string relative;
  std::string reason;
  bool removed = false;
};

struct VerifyReport {
  std::size_t checked_cubins = 0;
  std::size_t checked_tuning = 0;
  std::vector<BadEntry> bad;
};

// Reads every cubin entry and tuning record and checks it: cubins through
// CubinStore::decode (checksum, format, key = file name) and
// CubinStore::payload_problem (a CUDA ELF for its arch), tuning records as a
// JSON object whose "key" hashes to the file name. With `remove_bad`, a bad
// entry is removed unless it was replaced meanwhile; so is a file owned by
// another user or writable by group or others. A directory that is not
// trusted is reported as bad and left alone. Entries that vanish during the
// run are skipped. A read-only root (RootAccess::read_only) is checked by its
// own rules and only read: nothing is removed there, whatever `remove_bad`.
VerifyReport verify_cache(const std::filesystem::path& root, bool remove_bad = true,
                          RootAccess access = RootAccess::writable);

// Why `bytes` is not a valid tuning record named `hex`.json; "" when it is.
std::string tuning_record_problem(const std::string& hex, const std::string& bytes);
// Why `bytes` is not a valid cubin entry for `key`; "" when it is.
std::string cubin_entry_problem(const std::string& key, const std::string& bytes);

struct ClearReport {
  std::size_t removed_files = 0;
  std::uint64_t removed_bytes = 0;
  std::size_t kept_temp_files = 0;  // live writers' temp files (under an hour old)
};

// Removes the files under cubin/ and tuning/ (directories stay, so writers
// running now never find their directory gone); a temp file under an hour old
// belongs to a live writer and is left. Throws UntrustedCacheDir, removing
// nothing, when a directory under the root is not trusted.
ClearReport clear_cache(const std::filesystem::path& root);

// JSON forms for tools.
nlohmann::json to_json(const CubinInfo& info);
nlohmann::json to_json(const CacheStats& stats);
nlohmann::json to_json(const VerifyReport& report);

}  // namespace jit::cache
