// A whole cache (cubin entries + tuning records) in one file, so that one node
// warms the cache and every node of a cluster imports it.
//
// Container, version 1 (integers little endian):
//   "CUJITAR\0" | u32 version | zstd stream | SHA-256 of every byte before it
// The zstd stream (content checksums on) decompresses to
//   u64 manifest length | manifest JSON | the files' bytes, in manifest order
// and the manifest is
//   {"format": "cujit-cache-archive", "version": 1,
//    "files": [{"path": "cubin/ab/<key>.cubin", "size": N, "sha256": "<hex>"}, ...]}
// Paths are relative to the cache root and only the two entry layouts are
// accepted ("cubin/xx/<64 hex>.cubin", "tuning/<64 hex>.json"), so a hostile
// archive cannot name a file anywhere else.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/maintenance.h"

namespace jit::cache {

inline constexpr std::uint32_t kArchiveFormatVersion = 1;
// Limits a reader enforces before allocating (a cubin is a few MiB at most).
inline constexpr std::uint64_t kArchiveMaxFileBytes = std::uint64_t{256} << 20;
inline constexpr std::uint64_t kArchiveMaxManifestBytes = std::uint64_t{64} << 20;

struct ExportReport {
  std::size_t cubins = 0;
  std::size_t tuning_records = 0;
  std::uint64_t bytes = 0;          // the entries' bytes (uncompressed)
  std::uint64_t archive_bytes = 0;  // the archive file's size
  std::vector<BadEntry> skipped;    // invalid entries left out (removed is false)
};

// Writes every valid cubin entry and tuning record under `root` to `archive`
// (replaced atomically: a temp file beside it, then a rename). Invalid entries
// are left out and reported; entries that vanish meanwhile are left out.
// Throws CacheError when the archive cannot be written.
ExportReport export_archive(const std::filesystem::path& root, const std::filesystem::path& archive);

struct ImportReport {
  std::size_t cubins = 0;
  std::size_t tuning_records = 0;
  std::size_t written = 0;    // new or different from what was there
  std::size_t unchanged = 0;  // already present with the same bytes
  std::uint64_t bytes = 0;
};

// Checks the whole archive first (container checksum, manifest, every path,
// every file's size and SHA-256, every cubin entry through CubinStore::decode,
// every tuning record's key against its name) and only then publishes each
// file under `root` with write_file_atomic (root is created 0700 and checked
// like the cache directory). Any problem throws CacheError saying what is wrong
// and that nothing was imported; a rejected archive writes nothing.
ImportReport import_archive(const std::filesystem::path& archive, const std::filesystem::path& root);

// One file of an archive, for encode_archive.
struct ArchiveFile {
  std::string relative;
  std::string bytes;
};

// The container for `files`, in memory, exactly as given: paths and contents
// are not checked (export_archive and import_archive do that). For tests and
// for building archives by hand.
std::string encode_archive(const std::vector<ArchiveFile>& files);

}  // namespace jit::cache
