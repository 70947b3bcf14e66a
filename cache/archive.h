// A whole cache (cubin entries + tuning records) in one file, so that one node
// warms the cache and every node of a cluster imports it.
//
// Container, version 2 (integers little endian):
//   "CUJITAR\0" | u32 version | zstd stream |
//   u8 signature kind (0 none, 1 Ed25519) | 64-byte signature (zeros if none) |
//   SHA-256 of every byte before it
// The signature is over SHA-256(header and zstd stream), with a domain string
// (cache/archive_signature.h). The zstd stream (content checksums on)
// decompresses to
//   u64 manifest length | manifest JSON | the files' bytes, in manifest order
// and the manifest is
//   {"format": "cujit-cache-archive", "version": 2,
//    "files": [{"path": "cubin/ab/<key>.cubin", "size": N, "sha256": "<hex>"}, ...]}
// Paths are relative to the cache root and only the two entry layouts are
// accepted ("cubin/xx/<64 hex>.cubin", "tuning/<64 hex>.json"), so a hostile
// archive cannot name a file anywhere else. docs/security.md says what an
// archive vouches for.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/maintenance.h"

namespace jit::cache {

inline constexpr std::uint32_t kArchiveFormatVersion = 2;
// Limits a reader enforces before allocating or writing: the manifest's
// length (a manifest entry is ~150 bytes, so ~28,000 files), and the files'
// total against the archive's own size (a decompression bomb expands far
// beyond what cubins and records do; small archives get a floor).
inline constexpr std::uint64_t kArchiveMaxManifestBytes = std::uint64_t{4} << 20;
inline constexpr std::uint64_t kArchiveMaxExpansion = 1024;
inline constexpr std::uint64_t kArchiveExpansionFloorBytes = std::uint64_t{64} << 20;

struct ExportOptions {
  std::filesystem::path sign_key;  // an Ed25519 private key in PEM; empty: unsigned
};

struct ExportReport {
  std::size_t cubins = 0;
  std::size_t tuning_records = 0;
  std::uint64_t bytes = 0;          // the entries' bytes (uncompressed)
  std::uint64_t archive_bytes = 0;  // the archive file's size
  bool is_signed = false;
  std::vector<BadEntry> skipped;    // invalid entries and untrusted directories left out (removed is false)
};

// Writes every valid cubin entry and tuning record under `root` to `archive`
// (replaced atomically: a temp file beside it, then a rename). Invalid
// entries, other users' files and untrusted directories are left out and
// reported; entries that vanish meanwhile are left out. Throws CacheError
// when the archive cannot be written or the key cannot sign.
ExportReport export_archive(const std::filesystem::path& root, const std::filesystem::path& archive,
                            const ExportOptions& options = {});

struct ImportOptions {
  // Replace an existing valid entry whose bytes differ (otherwise it is kept
  // and reported as a conflict).
  bool replace = false;
  // Ed25519 public keys in PEM; when any is given, the archive must carry a
  // signature by one of them.
  std::vector<std::filesystem::path> trusted_keys;
  // The files' total may not exceed this (the cache's bound,
  // CUJIT_CACHE_MAX_BYTES, for cujit-cache).
  std::uint64_t max_total_bytes = UINT64_MAX;
};

struct ImportReport {
  std::size_t cubins = 0;
  std::size_t tuning_records = 0;
  std::size_t written = 0;    // new, or replacing an invalid entry, or replacing a valid one with `replace`
  std::size_t unchanged = 0;  // already present with the same bytes
  std::uint64_t bytes = 0;
  bool is_signed = false;            // the archive carries a signature
  bool signature_verified = false;   // ... by one of the trusted keys
  std::vector<std::string> conflicts;  // valid entries kept, differing from the archive's (not replaced)
};

// Checks the whole archive first (container checksum, signature when trusted
// keys are given, manifest and its limits, every path, every file's size and
// SHA-256, every cubin entry through CubinStore::decode and payload_problem,
// every tuning record's key against its name), opens every directory it will
// write through TrustedDir (root created 0700), and only then publishes each
// file. Any problem throws CacheError saying what is wrong and that nothing
// was imported; a rejected archive writes no file.
ImportReport import_archive(const std::filesystem::path& archive, const std::filesystem::path& root,
                            const ImportOptions& options = {});

// One file of an archive, for encode_archive.
struct ArchiveFile {
  std::string relative;
  std::string bytes;
};

// The container for `files`, in memory, exactly as given: paths and contents
// are not checked (export_archive and import_archive do that). For tests and
// for building archives by hand; signed with `sign_key` when given.
std::string encode_archive(const std::vector<ArchiveFile>& files, const std::filesystem::path& sign_key = {});

}  // namespace jit::cache
