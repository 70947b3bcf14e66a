// Whole-file writes that readers never see half done: a temp file created
// with O_EXCL|O_NOFOLLOW in the target's directory, fsync, then renameat over
// the target inside that same directory (by descriptor, so nothing between
// the create and the rename can redirect the write).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace jit::cache {

// A file written in pieces and published by commit(); until then readers
// see the old target (or none), and a writer that gives up (destroyed without
// commit) leaves nothing behind. `dir_fd` stays owned by the caller and must
// outlive the writer; `display` names the target in messages.
class AtomicFileWriter {
 public:
  AtomicFileWriter(int dir_fd, std::string name, std::string display);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  // fsync, rename over the target, fsync the directory; returns the size.
  std::uint64_t commit();

 private:
  [[noreturn]] void fail(const char* what, int err);
  int dir_fd_;
  std::string name_, display_, tmp_name_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// `bytes` as the whole of `name` in the directory `dir_fd`, atomically.
// Throws CacheError on any failure (the temp file is removed).
void write_file_atomic_at(int dir_fd, const std::string& name, std::string_view bytes, const std::string& display);

// The same by path: creates missing parent directories (0700), then writes.
// For files outside a cache root (repro bundles); cache entries go through
// TrustedDir.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Reads a regular file whole; nullopt if it is missing, not a regular file
// (a symlink is refused), or unreadable.
std::optional<std::string> read_regular_file(const std::filesystem::path& path);

// The name write_file_atomic gives its temp files: ".<name>.tmp.<pid>.<hex>"
// (cache_scan recognizes it).
std::string temp_file_name(std::string_view name);

}  // namespace jit::cache
