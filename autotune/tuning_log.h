// The autotuner's log lines, written through the runtime's logger (the
// runtime decides where lines go and which levels are on): a line is only
// formatted when its level is on.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <string>

namespace jit::autotune {

struct TuningLog {
  enum Level { off = 0, info = 1, debug = 2 };
  int level = off;
  std::function<void(int level, const std::string& line)> write;

  template <class... Args>
  void info_line(fmt::format_string<Args...> format, Args&&... args) const {
    if (level >= info && write) write(info, fmt::format(format, std::forward<Args>(args)...));
  }
  template <class... Args>
  void debug_line(fmt::format_string<Args...> format, Args&&... args) const {
    if (level >= debug && write) write(debug, fmt::format(format, std::forward<Args>(args)...));
  }
};

}  // namespace jit::autotune
