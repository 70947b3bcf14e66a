#include "cache/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include <fmt/format.h>

#include "cache/cache_error.h"
#include "cache/fs_detail.h"

namespace jit::cache {

namespace {

constexpr std::size_t kMaxNameBytes = 200;

[[noreturn]] void fail(const std::string& what, int err) {
  throw CacheError(fmt::format("{}: {}", what, detail::errno_text(err)));
}

}  // namespace

std::string safe_file_name(std::string_view name) {
  std::string out(name.substr(0, kMaxNameBytes));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || u < 0x20 || u == 0x7f) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out.insert(0, "_");
  return out;
}

std::vector<std::string> safe_relative_path(std::string_view name) {
  std::vector<std::string> parts;
  while (!name.empty()) {
    const std::size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    if (!part.empty() && part != ".") parts.push_back(safe_file_name(part));
    name = slash == std::string_view::npos ? std::string_view() : name.substr(slash + 1);
  }
  if (parts.empty()) parts.push_back(safe_file_name(""));
  return parts;
}

DirFd::~DirFd() {
  if (fd_ >= 0) ::close(fd_);
}

DirFd& DirFd::operator=(DirFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DirFd open_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail(fmt::format("cannot open directory {}", path), errno);
  return DirFd(fd);
}

DirFd open_private_subdir(const DirFd& parent, const std::string& name) {
  if (::mkdirat(parent.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    fail(fmt::format("cannot create directory {}", name), errno);
  }
  // O_NOFOLLOW: a symbolic link planted at `name` fails here (ELOOP or ENOTDIR).
  DirFd dir(::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) fail(fmt::format("cannot open directory {} (a symbolic link is refused)", name), errno);
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) fail(fmt::format("cannot inspect directory {}", name), errno);
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    throw CacheError(fmt::format("directory {} is not private (owner uid {}, mode {:04o}); remove it", name,
                                 static_cast<unsigned long>(st.st_uid), static_cast<unsigned>(st.st_mode & 07777)));
  }
  return dir;
}

DirFd make_unique_subdir(const DirFd& parent, std::string_view prefix, std::string& name) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device entropy;  // the kernel's random source: names no one can predict
  for (int attempt = 0; attempt < 100; ++attempt) {
    name = safe_file_name(prefix);
    for (int i = 0; i < 12; ++i) name += kAlphabet[entropy() % (sizeof kAlphabet - 1)];
    if (::mkdirat(parent.get(), name.c_str(), 0700) == 0) return open_private_subdir(parent, name);
    if (errno != EEXIST) fail(fmt::format("cannot create directory {}", name), errno);
  }
  throw CacheError(fmt::format("cannot create a directory named {}...: every name tried exists", prefix));
}

void write_new_file(const DirFd& dir, const std::string& name, std::string_view bytes) {
  const int fd = ::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail(fmt::format("cannot create {}", name), errno);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(fmt::format("cannot write {}", name), err);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::close(fd) != 0) fail(fmt::format("cannot write {}", name), errno);
}

}  // namespace jit::cache
