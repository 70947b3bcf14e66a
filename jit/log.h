// The library's only output: lines on stderr when CUJIT_LOG asks for them.
#pragma once
#include <fmt/format.h>

#include <string_view>

#include "jit/knobs.h"

namespace jit::detail {

void write_log_line(LogLevel level, std::string_view message);

template <class... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  if (knobs().log_level >= LogLevel::info)
    write_log_line(LogLevel::info, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
  if (knobs().log_level >= LogLevel::debug)
    write_log_line(LogLevel::debug, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace jit::detail
