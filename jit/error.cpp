#include "jit/error.h"

#include <fmt/format.h>

namespace jit {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::NoDevice: return "no device";
    case ErrorCode::Driver: return "driver error";
    case ErrorCode::Compile: return "compile error";
    case ErrorCode::Cache: return "cache error";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(fmt::format("cujit: {}: {}", to_string(code), message)), code_(code) {}

}  // namespace jit
