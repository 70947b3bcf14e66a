// Tests for cache/sha256, cache/cache_dir and cache/atomic_file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "cache/atomic_file.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/sha256.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace jit::cache;

namespace {

using CacheDirTest = cujit_test::TempDirTest;

// Sets/unsets an environment variable for one scope, restoring it afterwards.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~EnvGuard() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  void set(const char* value) { ::setenv(name_, value, 1); }
  void unset() { ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

using cujit_test::slurp;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const Digest d = sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  EXPECT_EQ(to_hex(d), sha256_hex("abc"));
}

TEST(DefaultCacheDir, EnvPrecedence) {
  EnvGuard cujit("CUJIT_CACHE_DIR"), xdg("XDG_CACHE_HOME"), home("HOME");
  cujit.set("/a/cujit_dir");
  xdg.set("/b/xdg");
  home.set("/c/home");
  EXPECT_EQ(default_cache_dir(), fs::path("/a/cujit_dir"));

  cujit.set("");  // empty counts as unset
  EXPECT_EQ(default_cache_dir(), fs::path("/b/xdg/cujit"));
  cujit.unset();
  EXPECT_EQ(default_cache_dir(), fs::path("/b/xdg/cujit"));

  xdg.set("");
  EXPECT_EQ(default_cache_dir(), fs::path("/c/home/.cache/cujit"));
  xdg.unset();
  EXPECT_EQ(default_cache_dir(), fs::path("/c/home/.cache/cujit"));

  home.unset();
  EXPECT_THROW(default_cache_dir(), CacheError);
  home.set("");
  try {
    default_cache_dir();
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find("CUJIT_CACHE_DIR"), std::string::npos) << e.what();
  }
}

TEST_F(CacheDirTest, CreatesPrivateDirs) {
  const fs::path dir = tmp_ / "a" / "b" / "c";
  ASSERT_NO_THROW(ensure_private_dir(dir));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(mode_of(tmp_ / "a"), 0700u);
  EXPECT_EQ(mode_of(tmp_ / "a" / "b"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  // Idempotent, trailing slash accepted.
  EXPECT_NO_THROW(ensure_private_dir(dir));
  EXPECT_NO_THROW(ensure_private_dir(fs::path(dir.string() + "/")));
}

TEST_F(CacheDirTest, LeavesExistingParentsAlone) {
  const fs::path parent = tmp_ / "shared";
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 0755), 0);
  ASSERT_NO_THROW(ensure_private_dir(parent / "mine"));
  EXPECT_EQ(mode_of(parent), 0755u);
  EXPECT_EQ(mode_of(parent / "mine"), 0700u);
}

TEST_F(CacheDirTest, RefusesWorldWritableDir) {
  const fs::path dir = tmp_ / "open";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  try {
    ensure_private_dir(dir);
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("chmod 700"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0720), 0);  // group-writable only
  EXPECT_THROW(ensure_private_dir(dir), CacheError);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // readable by others is fine
  EXPECT_NO_THROW(ensure_private_dir(dir));
}

TEST_F(CacheDirTest, RefusesSymlinkToDir) {
  const fs::path real = tmp_ / "real";
  const fs::path link = tmp_ / "link";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  fs::create_directory_symlink(real, link);
  try {
    ensure_private_dir(link);
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("symbolic link"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUJIT_CACHE_DIR"), std::string::npos) << msg;
  }
}

TEST_F(CacheDirTest, RefusesNonDirectory) {
  const fs::path file = tmp_ / "file";
  std::ofstream(file) << "x";
  EXPECT_THROW(ensure_private_dir(file), CacheError);
  EXPECT_THROW(ensure_private_dir(file / "sub"), CacheError);
}

TEST_F(CacheDirTest, RefusesDirOwnedByOthers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  const fs::path dir = tmp_ / "theirs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 12345, 12345), 0);
  try {
    ensure_private_dir(dir);
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find("owned by uid 12345"), std::string::npos) << e.what();
  }
}

TEST_F(CacheDirTest, WriteAtomicCreatesParentAndReplaces) {
  const fs::path file = tmp_ / "x" / "y" / "f.bin";
  const std::string data("a\0b\xff", 4);
  ASSERT_NO_THROW(write_file_atomic(file, data));
  EXPECT_EQ(mode_of(tmp_ / "x"), 0700u);
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_EQ(slurp(file), data);
  auto r = read_regular_file(file);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, data);

  const std::string big(1 << 20, 'z');
  ASSERT_NO_THROW(write_file_atomic(file, big));
  EXPECT_EQ(read_regular_file(file).value_or(""), big);
  ASSERT_NO_THROW(write_file_atomic(file, ""));
  EXPECT_EQ(read_regular_file(file).value_or("x"), "");

  // No temp files are left behind.
  int count = 0;
  for (const auto& e : fs::directory_iterator(file.parent_path())) {
    (void)e;
    ++count;
  }
  EXPECT_EQ(count, 1);
}

TEST_F(CacheDirTest, WriteAtomicFailureThrows) {
  const fs::path blocker = tmp_ / "blocker";
  std::ofstream(blocker) << "x";
  // The parent is a regular file: cannot create anything under it.
  EXPECT_THROW(write_file_atomic(blocker / "f", "data"), CacheError);
  // The target is a directory: rename fails, the temp file is removed.
  const fs::path dir = tmp_ / "d";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir / "target").c_str(), 0700), 0);
  try {
    write_file_atomic(dir / "target", "data");
    FAIL() << "expected CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "target").string()), std::string::npos);
  }
  int count = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++count;
  }
  EXPECT_EQ(count, 1);
}

// `ulimit -f` with SIGXFSZ at its default action: the write past the limit
// used to kill the process and leave the temp file for an hour. Now the store
// fails with EFBIG, removes its temp file, and the process lives on with the
// signal neither delivered later nor left pending.
TEST_F(CacheDirTest, WritePastTheFileSizeLimitFailsCleanlyInsteadOfKilling) {
  const fs::path dir = tmp_ / "limited";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_DFL);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 3;
    try {
      write_file_atomic(dir / "big", std::string(64 * 1024, 'x'));
      code = 1;  // the limit did not apply
    } catch (const CacheError& e) {
      code = std::string(e.what()).find("too large") != std::string::npos ? 0 : 2;  // EFBIG: "File too large"
    }
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGXFSZ)) code = 4;
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: written anyway, 2: another error, 4: SIGXFSZ left pending";
  EXPECT_TRUE(fs::is_empty(dir)) << "the temp file was left behind";
}

// A root longer than PATH_MAX used to fail only after creating the
// directories that fit (41 of them): nothing is created now.
TEST_F(CacheDirTest, RootLongerThanPathMaxCreatesNothing) {
  fs::path root = tmp_ / "first";
  while (root.native().size() <= PATH_MAX) root /= std::string(100, 'd');
  try {
    ensure_private_dir(root / "cubin");
    FAIL() << "a path of " << root.native().size() << " bytes was accepted";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the system's limit"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp_ / "first"));
  fs::path long_name = tmp_ / std::string(NAME_MAX + 1, 'n') / "cache";
  EXPECT_THROW(ensure_private_dir(long_name), CacheError);
  EXPECT_TRUE(fs::is_empty(tmp_));
}

TEST_F(CacheDirTest, ReadRegularFileRefusesOthers) {
  EXPECT_FALSE(read_regular_file(tmp_ / "missing").has_value());
  EXPECT_FALSE(read_regular_file(tmp_).has_value());  // a directory
  const fs::path target = tmp_ / "target";
  std::ofstream(target) << "secret";
  fs::create_symlink(target, tmp_ / "link");
  EXPECT_FALSE(read_regular_file(tmp_ / "link").has_value());
  EXPECT_EQ(read_regular_file(target).value_or(""), "secret");
  const fs::path fifo = tmp_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(read_regular_file(fifo).has_value());  // and does not hang
}
