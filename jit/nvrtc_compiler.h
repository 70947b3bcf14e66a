// NVRTC as a pure function: sources + name expression + options + arch ->
// cubin bytes, the kernel's lowered name and its resource report.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "jit/kernel_family.h"

namespace jit::detail {

// From ptxas -v. registers stays -1 when the log has no report: where a
// driver is installed, NVRTC may serve a repeated compile from the CUDA
// compute cache without running ptxas (CUDA_CACHE_DISABLE=1 prevents that).
struct ResourceUsage {
  int registers = -1;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
  int static_smem_bytes = 0;
  // ptxas warnings C7515 and C7512: it had to serialize the kernel's wgmma
  // (an accumulator register is written by another instruction while a wgmma
  // may still be writing it, or the overlapped code needs more registers than
  // the function has), which costs the overlap the kernel is built on.
  bool wgmma_serialized = false;

  int spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
};

struct CompileRequest {
  const KernelSources* sources = nullptr;
  std::string name_expression;       // e.g. "cujit::portable::attn_fwd_portable<128, 128, 64, 2, 8, cujit::f16, true>"
  std::string arch;                  // "sm_90a", "sm_89", ...
  std::vector<std::string> options;  // family options; arch, std and -v are added here
};

struct CompiledBinary {
  std::string cubin;
  std::string lowered_name;
  std::string log;  // NVRTC + ptxas report
  ResourceUsage usage;
};

// Throws Error(Compile) carrying the NVRTC log and the options on failure.
CompiledBinary nvrtc_compile(const CompileRequest& request);

// Every option the compile will use, in order (part of the cache key).
std::vector<std::string> nvrtc_options(const CompileRequest& request);

// "13.0", for cache keys and tuning records.
std::string nvrtc_version();

// Reads the ptxas -v report for one entry from an NVRTC log.
ResourceUsage parse_ptxas_report(std::string_view log);

}  // namespace jit::detail
