/// @file error.h
/// The one exception type cujit throws.
#pragma once
#include <stdexcept>
#include <string>

namespace jit {

/// What kind of failure an Error reports.
enum class ErrorCode {
  InvalidArgument,  ///< a tensor or option is wrong; the message names it
  Unsupported,      ///< valid, but no kernel family handles it (dtype, head dim, arch)
  NoDevice,         ///< no CUDA driver or no GPU
  Driver,           ///< a CUDA Driver API call failed; the message names the call and error
  Compile,          ///< NVRTC rejected a kernel; the message holds the log and options
  Cache,            ///< the cache directory cannot be used; the message says how to fix it
  Internal,         ///< a bug in cujit
};

const char* to_string(ErrorCode code);

/// Thrown for every failure. what() is a complete, actionable message.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace jit
