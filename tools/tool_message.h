// One prefix per message: a tool's errors start with the tool's name, in
// place of the "cujit: " that jit::Error puts before its code.
#pragma once
#include <exception>
#include <string>
#include <string_view>

inline std::string tool_message(std::string_view tool, const std::exception& e) {
  std::string_view what = e.what();
  constexpr std::string_view library = "cujit: ";
  if (what.substr(0, library.size()) == library) what.remove_prefix(library.size());
  return std::string(tool) + ": " + std::string(what);
}
