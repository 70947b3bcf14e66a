// What a directory tree holds, to assert that something never wrote to it:
// every path with its type, mode, owner, mtime and (for files) bytes. Tests
// run as root here, where chmod 555/444 does not stop a write, so "never
// written" is checked by comparing snapshots, not by relying on EACCES.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>

#include "tests/support/file_bytes.h"

namespace cujit_test {

struct TreeEntry {
  unsigned mode = 0;  // st_mode: type and permission bits
  unsigned long uid = 0;
  long long mtime_ns = 0;
  std::string bytes;  // regular files only
  bool operator==(const TreeEntry&) const = default;
};

using TreeSnapshot = std::map<std::string, TreeEntry>;  // by path relative to the root ("." for the root)

inline TreeSnapshot snapshot_tree(const std::filesystem::path& root) {
  TreeSnapshot out;
  auto add = [&](const std::filesystem::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    TreeEntry e{static_cast<unsigned>(st.st_mode), static_cast<unsigned long>(st.st_uid),
                static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, {}};
    if (S_ISREG(st.st_mode)) e.bytes = slurp(p);
    out[p.lexically_relative(root).string()] = std::move(e);
  };
  add(root);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    add(it->path());
  }
  return out;
}

// chmod -R: `dir_mode` for directories, `file_mode` for files (e.g. 0555, 0444:
// a tree as an image layer or a read-only mount shows it).
inline void chmod_tree(const std::filesystem::path& root, unsigned dir_mode, unsigned file_mode) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink(ec)) ::chmod(it->path().c_str(), it->is_directory(ec) ? dir_mode : file_mode);
  }
  ::chmod(root.c_str(), dir_mode);
}

// chown -R (no link following): for a root owned by another user.
inline void chown_tree(const std::filesystem::path& root, uid_t uid, gid_t gid) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    (void)::lchown(it->path().c_str(), uid, gid);
  }
  (void)::lchown(root.c_str(), uid, gid);
}

}  // namespace cujit_test
