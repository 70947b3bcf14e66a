// A directory of the cache that has been checked, held open by descriptor.
//
// The cache holds code that will run, so nothing under its root may be
// redirected or planted by another user. The root is opened once
// (O_NOFOLLOW at its last component) and every directory below it is opened
// from its parent's descriptor with openat(O_NOFOLLOW | O_DIRECTORY), one
// component at a time; each is fstat'ed and must be owned by this user and
// not writable by group or others. Files are opened, created (O_EXCL) and
// renamed relative to the descriptor of their checked directory, so swapping
// a directory for a symlink after the check redirects nothing.
#pragma once
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_dir.h"
#include "cache/fs_detail.h"

namespace jit::cache {

// Why a directory with this stat may not be trusted ("" when it may): not a
// directory, owned by another user, writable by group or others.
std::string untrusted_dir_reason(const struct stat& st);
// Why a file with this stat may not be trusted as a cache entry ("" when it
// may): not a regular file, owned by another user, writable by group or others.
std::string untrusted_file_reason(const struct stat& st);

class TrustedDir {
 public:
  // The cache root: opened (and created 0700 with its missing parents when
  // `create`), then checked. Throws UntrustedCacheDir for a symlink, another
  // owner or a group/other-writable mode, and CacheError when it cannot be
  // created or opened or is not a directory.
  static TrustedDir open_root(const std::filesystem::path& root, bool create);

  // A directory below this one, "cubin" or "cubin/ab" (each component opened
  // and checked in turn). nullopt when a component is missing and !create;
  // throws UntrustedCacheDir naming the component when one is a symlink,
  // not a directory, or not trusted, and CacheError when it cannot be made.
  std::optional<TrustedDir> open_subdir(std::string_view relative, bool create) const;

  int fd() const { return fd_->get(); }
  const std::filesystem::path& path() const { return path_; }

  // The regular file `name` of this directory, read whole with its stat;
  // nullopt when it is missing, not a regular file (symlinks are not
  // followed, FIFOs do not block), larger than max_bytes or unreadable.
  // `problem`, when given, is set to why an existing file was refused
  // ("" when it was read or is missing).
  struct File {
    std::string bytes;
    struct stat st {};
  };
  std::optional<File> read_file(std::string_view name, std::uint64_t max_bytes = UINT64_MAX,
                                std::string* problem = nullptr) const;
  // Writes `name` atomically (temp file created O_EXCL|O_NOFOLLOW here,
  // renamed here).
  void write_file(std::string_view name, std::string_view bytes) const;
  // lstat of `name` here; nullopt (errno kept) when it cannot be inspected.
  std::optional<struct stat> stat_entry(std::string_view name) const;
  bool unlink(std::string_view name) const;
  // Names in this directory, sorted ("." and ".." left out).
  std::vector<std::string> list() const;

 private:
  TrustedDir(std::shared_ptr<const detail::Fd> fd, std::filesystem::path path)
      : fd_(std::move(fd)), path_(std::move(path)) {}
  std::shared_ptr<const detail::Fd> fd_;
  std::filesystem::path path_;
};

}  // namespace jit::cache
