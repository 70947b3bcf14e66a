#include "jit/log.h"

#include <cstdio>
#include <mutex>

namespace jit::detail {

void write_log_line(LogLevel level, std::string_view message) {
  static std::mutex mutex;  // whole lines, even from many threads
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[cujit %s] %.*s\n", level == LogLevel::debug ? "debug" : "info", int(message.size()),
               message.data());
}

}  // namespace jit::detail
