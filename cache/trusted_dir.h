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
//
// A read-only root (CUJIT_CACHE_READONLY_DIRS: a pre-warmed cache in an image
// layer or on a read-only mount) is served, never written: it need not be
// ours nor mode 700, but everything in it must be owned by the root's owner,
// by root or by us (the users who could change the root anyway) and be
// writable by no one else. A TrustedDir of such a root, and every directory
// opened below it, refuses to create, write or remove anything.
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

// Which rules a cache root is opened under: the writable root's, or a
// pre-warmed read-only root's (see above).
enum class RootAccess { writable, read_only };

class TrustedDir {
 public:
  // The cache root: opened (and created 0700 with its missing parents when
  // `create`), then checked. Throws UntrustedCacheDir for a symlink, another
  // owner or a group/other-writable mode, and CacheError when it cannot be
  // created or opened or is not a directory.
  static TrustedDir open_root(const std::filesystem::path& root, bool create);
  // A read-only root: opened without following a symlink at its last
  // component, never created. Throws UntrustedCacheDir for a symlink or a
  // group/other-writable mode (naming `chmod -R go-w`), and CacheError when it
  // is missing, unreadable or not a directory.
  static TrustedDir open_read_only_root(const std::filesystem::path& root);
  // An existing root under `access`'s rules: open_root(root, false) or
  // open_read_only_root(root).
  static TrustedDir open_existing_root(const std::filesystem::path& root, RootAccess access);

  // A directory below this one, "cubin" or "cubin/ab" (each component opened
  // and checked in turn). nullopt when a component is missing and !create;
  // throws UntrustedCacheDir naming the component when one is a symlink,
  // not a directory, or not trusted, and CacheError when it cannot be made
  // (or `create` is asked of a read-only root).
  std::optional<TrustedDir> open_subdir(std::string_view relative, bool create) const;

  int fd() const { return fd_->get(); }
  const std::filesystem::path& path() const { return path_; }
  // True under a root opened by open_read_only_root.
  bool read_only() const { return read_only_; }

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
  // renamed here). Throws CacheError under a read-only root.
  void write_file(std::string_view name, std::string_view bytes) const;
  // lstat of `name` here; nullopt (errno kept) when it cannot be inspected.
  std::optional<struct stat> stat_entry(std::string_view name) const;
  // False (nothing removed) under a read-only root.
  bool unlink(std::string_view name) const;
  // Names in this directory, sorted ("." and ".." left out).
  std::vector<std::string> list() const;

 private:
  TrustedDir(std::shared_ptr<const detail::Fd> fd, std::filesystem::path path, bool read_only, uid_t owner)
      : fd_(std::move(fd)), path_(std::move(path)), read_only_(read_only), owner_(owner) {}
  // Why a directory or file below this root may not be trusted ("" when it may).
  std::string untrusted_reason(const struct stat& st, bool directory) const;
  std::shared_ptr<const detail::Fd> fd_;
  std::filesystem::path path_;
  bool read_only_ = false;
  uid_t owner_ = 0;  // a read-only root's owner, whose files it may hold

};

}  // namespace jit::cache
