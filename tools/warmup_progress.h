// The warm-up's progress on stderr, for cujit-warmup and cujit-demo: a live
// line (\r, erase to end of line) on a terminal; elsewhere (CI logs, pipes) a
// plain line at each tenth of the way, so a log stays readable.
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "jit/warmup.h"

inline jit::WarmupProgress warmup_progress(std::string tool, bool live = ::isatty(STDERR_FILENO)) {
  const auto start = std::chrono::steady_clock::now();
  return [tool, live, start](const jit::CompileReport& r, std::size_t done, std::size_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = elapsed / double(done) * double(total - done);
    if (live) {
      fmt::print(stderr, "\r[{}/{}] ETA {:.0f} s  {} {} {}\033[K", done, total, eta, r.arch, r.variant,
                 r.from_cache ? "(cached)" : "");
      if (done == total) fmt::print(stderr, "\n");
    } else if (done == total || done * 10 / total != (done - 1) * 10 / total) {
      fmt::print(stderr, "{}: {}/{} variants for {}, {:.0f} s so far, ETA {:.0f} s\n", tool, done, total, r.arch,
                 elapsed, eta);
    }
  };
}
