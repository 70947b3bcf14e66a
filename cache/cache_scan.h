// The files of a cache directory, as plain data: what eviction, verification,
// listing and archiving work over. Every function here tolerates other
// processes adding, replacing and removing files at the same time: a file that
// vanishes between two steps is skipped, never an error.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/trusted_dir.h"

namespace jit::cache {

// Which file of the cache a relative path ("cubin/ab/<key>.cubin") names.
enum class CacheFileKind {
  cubin,   // cubin/<first 2 hex of key>/<64 hex key>.cubin
  tuning,  // tuning/<64 hex>.json
  temp,    // .<name>.tmp.<pid>.<hex>: a writer's file before its rename
  other,   // anything else found under cubin/ or tuning/
};

// The kind a relative path names, by its spelling alone ("/" separated, as in
// archives). Only the exact entry layouts are cubin/tuning: no "..", no
// absolute paths, no extra components, lowercase hex only.
CacheFileKind classify_relative_path(std::string_view relative);

// True for "cubin/xx/<64hex>.cubin" (xx = the key's first two characters) and
// "tuning/<64hex>.json": the only paths an archive may carry.
bool is_entry_relative_path(std::string_view relative);

// The 64-hex name in an entry path ("cubin/ab/<key>.cubin" -> key); "" when the
// path is not an entry path.
std::string entry_hex_name(std::string_view relative);

// Enough of a stat to tell whether a path still names the file seen earlier.
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;  // last modification (= last use, see touch_entry), ns since the epoch
  bool operator==(const FileIdentity&) const = default;
};

struct CacheFile {
  std::filesystem::path path;  // root / relative, for messages (operations go through `dir`)
  std::string relative;        // "/"-separated, relative to the cache root
  CacheFileKind kind = CacheFileKind::other;
  bool regular = false;        // false for symlinks, FIFOs, ... (never followed)
  FileIdentity id;
  std::optional<TrustedDir> dir;  // the checked directory it was found in
  std::string name;               // its name there
};

// A directory of the cache that failed TrustedDir's check: nothing below it
// was listed (or will be read, written or removed).
struct UntrustedSubtree {
  std::string relative;  // "cubin", "cubin/ab" or "tuning"
  std::string reason;    // the check's message, with the fix
};

struct CacheScan {
  std::filesystem::path root;
  std::vector<CacheFile> files;  // sorted by relative path
  std::uint64_t total_bytes = 0; // sizes of the regular files under cubin/ and tuning/
  std::vector<UntrustedSubtree> untrusted;
};

// Lists every file under root/cubin (one level of shard directories) and
// root/tuning, opening each directory through TrustedDir: a directory that is
// a symlink or not private is reported in `untrusted`, never entered. A
// missing root or directory is empty; files that vanish while they are listed
// are skipped. Throws UntrustedCacheDir when the root itself is not trusted.
// `before_stat`, when set, is called with each path just before it is
// inspected (a test hook for simulating concurrent removal). `access` says
// whose rules the root is checked by (a read-only root's files cannot be
// removed through the scan).
CacheScan scan_cache(const std::filesystem::path& root,
                     const std::function<void(const std::filesystem::path&)>& before_stat = {},
                     RootAccess access = RootAccess::writable);

// Throws UntrustedCacheDir naming the first untrusted subtree of `scan`, if
// any: what operations that write or remove (clear, prune, import) do first.
void refuse_untrusted(const CacheScan& scan);

// Reads a regular file (symlinks refused) whole, with the identity of what was
// read; nullopt when it is missing or unreadable.
struct FileContents {
  std::string bytes;
  FileIdentity id;
};
std::optional<FileContents> read_file_with_identity(const std::filesystem::path& path);
// The same for a scanned file, through its checked directory; a file owned by
// another user or writable by group or others is refused, with the reason in
// `problem` ("" when it was read or has vanished).
std::optional<FileContents> read_file_with_identity(const CacheFile& file, std::uint64_t max_bytes = UINT64_MAX,
                                                    std::string* problem = nullptr);

enum class RemoveResult {
  removed,  // it was the file seen and is gone now
  vanished, // someone else removed it first
  changed,  // it was replaced or used (touched) since it was seen: left alone
  failed,   // unlink failed (permissions, ...)
};

// Removes `file` (in its checked directory) only when it still has identity `expected`. A narrow race
// remains between the check and the unlink; losing it costs another process a
// cache miss, never a wrong result.
RemoveResult remove_if_unchanged(const CacheFile& file, const FileIdentity& expected);

// Sets the file's modification time to now (utimensat, no symlink following):
// the mark of a use that least-recently-used eviction goes by. False when the
// file is gone or cannot be touched; callers ignore that.
bool touch_entry(const std::filesystem::path& path);

// Current time in ns since the epoch (CLOCK_REALTIME, as file times are).
std::int64_t now_ns();

}  // namespace jit::cache
