// The cache layer's own exception; jit/ turns it into jit::Error.
#pragma once
#include <stdexcept>
#include <string>

namespace jit::cache {

class CacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace jit::cache
