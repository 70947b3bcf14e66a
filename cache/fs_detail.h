// Private helpers shared by the cache sources; not part of the public API.
#pragma once
#include <signal.h>

#include <filesystem>
#include <string>

namespace jit::cache::detail {

// Creates each missing component of `dir` with ::mkdir(..., 0700); components
// that already exist are left alone. Throws CacheError on failure. Does not
// check ownership or mode (ensure_private_dir does that for the final dir).
void create_dirs_0700(const std::filesystem::path& dir);

// Text for an errno value (thread-safe).
std::string errno_text(int err);

// A write past the file-size limit (RLIMIT_FSIZE, `ulimit -f`) raises
// SIGXFSZ, whose default action kills the process and leaves a temp file
// behind. While one of these lives, SIGXFSZ is blocked in this thread, so
// write() just fails with EFBIG and the store fails cleanly, as on a full
// disk; a SIGXFSZ the writes left pending is consumed before the thread's
// signal mask is restored.
class DeferSigxfsz {
 public:
  DeferSigxfsz();
  ~DeferSigxfsz();
  DeferSigxfsz(const DeferSigxfsz&) = delete;
  DeferSigxfsz& operator=(const DeferSigxfsz&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace jit::cache::detail
