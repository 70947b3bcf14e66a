// Step 6 of the call path, without a GPU: a variant's cubin from the disk
// cache, or compiled by NVRTC and published there.
#pragma once
#include <filesystem>
#include <string>

#include "jit/kernel_family.h"
#include "jit/nvrtc_compiler.h"

namespace jit::detail {

struct VariantBinary {
  std::string variant;
  std::string arch;
  std::string cubin;
  std::string lowered_name;
  ResourceUsage usage;
  bool from_cache = false;
  double compile_seconds = 0;
};

// Content key: SHA-256 over every input that changes the binary (sources,
// name expression, options, exact arch, NVRTC, cujit and entry format versions).
std::string binary_cache_key(const CompileRequest& request);

// Where this variant's entry lives in the disk cache (whether or not it is
// there now); empty when the disk cache is off. A warm-up checks with it that
// what it compiled is still there (eviction may have removed it).
std::filesystem::path cached_entry_path(const KernelFamily& family, const Json& spec, const Json& config,
                                        const std::string& arch);

enum class CompilePolicy { allow, forbid };

// With CompilePolicy::forbid (CUJIT_AUTOTUNE=frozen) a variant missing from
// the disk cache is Error(Unsupported) naming cujit-warmup, never a compile.
VariantBinary obtain_binary(const KernelFamily& family, const Json& spec, const Json& config, const std::string& arch,
                            CompilePolicy policy = CompilePolicy::allow);

}  // namespace jit::detail
