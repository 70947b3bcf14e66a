// Files whose names come from data (NVRTC include names, variant names read
// from cache metadata): each name becomes path components that cannot leave
// the directory they are put in, and files and directories are created
// through directory descriptors, without following links and without
// reusing anything that already exists.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace jit::cache {

// One path component with the same spelling where it is safe: '/', NUL and
// control characters become '_'; "", "." and ".." get a '_' in front; at
// most 200 bytes.
std::string safe_file_name(std::string_view name);

// A relative path kept inside its directory: the name split at '/', empty
// and "." components dropped (so "/abs/x.h" becomes abs/x.h), every other
// component through safe_file_name (so ".." becomes "_..").
std::vector<std::string> safe_relative_path(std::string_view name);

// An open directory descriptor, closed on destruction.
class DirFd {
 public:
  DirFd() = default;
  explicit DirFd(int fd) : fd_(fd) {}
  ~DirFd();
  DirFd(DirFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirFd& operator=(DirFd&& other) noexcept;
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// `path` opened as a directory; a symbolic link at its last component is
// refused. Throws CacheError.
DirFd open_directory(const std::string& path);

// `name` under `parent`, created 0700 when missing, opened without following
// a link; refused (CacheError) when it is not a directory of ours that only
// we can write.
DirFd open_private_subdir(const DirFd& parent, const std::string& name);

// A new 0700 directory under `parent` named `prefix` + 12 random characters
// (mkdtemp-style: unpredictable, never an existing one). `name` gets its name.
DirFd make_unique_subdir(const DirFd& parent, std::string_view prefix, std::string& name);

// Writes a new 0600 file `name` under `dir` (O_CREAT | O_EXCL | O_NOFOLLOW:
// an existing file or link there is an error, never written through).
void write_new_file(const DirFd& dir, const std::string& name, std::string_view bytes);

}  // namespace jit::cache
