// Kernel::Impl: a loaded module and its function, owned for the process's life.
#pragma once
#include <cuda.h>

#include <atomic>
#include <string>

#include "jit/binary_cache.h"
#include "jit/kernel_family.h"

namespace jit {

struct Kernel::Impl {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  std::string variant;
  int registers = -1;
  std::size_t params_size = 0;  // the kernel's one by-value parameter
  // Largest dynamic shared memory size opted in so far (cuFuncSetAttribute).
  mutable std::atomic<unsigned> smem_opt_in{48 * 1024};
};

namespace detail {
// Loads a binary into the current context (cuModuleLoadData).
std::unique_ptr<Kernel> load_kernel(const VariantBinary& binary);
}  // namespace detail

}  // namespace jit
