/// @file kernel_family.h
/// The types below both the runtime (jit/) and the autotuner (autotune/):
/// what a kernel family is, what it is compiled for and how it launches.
/// No GPU, no runtime: plain data and one interface. Users include it through
/// jit/kernel_family.h.
///
/// A family's *spec* fixes what the kernel is specialized on (dtype, head dim,
/// ...); a *config* is one point of its search space (tile sizes, stages,
/// warps). Both are JSON objects at this interface so that they are logged,
/// hashed and stored as they are; a family may keep them as structs inside
/// (jit/typed_kernel_family.h).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

struct CUstream_st;

namespace jit {

using Json = nlohmann::json;
using Stream = CUstream_st*;  ///< a CUstream / cudaStream_t; nullptr is the default stream

/// What a variant is compiled for and pruned against.
struct Target {
  std::string arch;             ///< NVRTC target: "sm_90a", "sm_89", "sm_80", ...
  int cc = 0;                   ///< compute capability as 10*major+minor (90, 89, ...)
  int max_smem_per_block = 0;   ///< dynamic shared memory opt-in limit, bytes
  int sm_count = 0;             ///< 0 when there is no device (offline compile)
  std::string device_name;      ///< "" when offline
};

/// Kernel source files handed to NVRTC as named in-memory headers. `entry`
/// names the translation unit; the others are what it #includes.
struct KernelSources {
  std::string entry;
  std::vector<std::pair<std::string, std::string>> files;  ///< (include name, text)
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchGeometry {
  Dim3 grid;
  Dim3 block;
  unsigned smem_bytes = 0;  ///< dynamic shared memory
  /// sm_90+: launch with programmatic stream serialization, so the kernel
  /// may start before the previous one in the stream ends; it must then wait
  /// for it (griddepcontrol.wait) before reading what that one wrote.
  bool programmatic_dependent_launch = false;
  /// sm_90+: CTAs per thread-block cluster along x (1: no clusters); grid.x
  /// must be a multiple of it.
  unsigned cluster_x = 1;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;

  virtual std::string name() const = 0;
  virtual const KernelSources& sources() const = 0;
  /// Every config worth considering for this spec (before pruning).
  virtual std::vector<Json> config_space(const Json& spec) const = 0;
  /// nullopt keeps the config; otherwise the reason it cannot run on target
  /// (e.g. "needs 240 KiB of shared memory, sm_89 allows 99 KiB").
  virtual std::optional<std::string> why_pruned(const Json& spec, const Json& config, const Target& target) const = 0;
  /// The config used without tuning (a cheap heuristic; must not be pruned).
  virtual Json default_config(const Json& spec, const Target& target) const = 0;
  /// One name labels logs, cache entries, tuning records and benchmark rows.
  virtual std::string variant_name(const Json& spec, const Json& config) const = 0;
  /// The C++ expression NVRTC instantiates, e.g. "my_kernel<128, float>".
  virtual std::string name_expression(const Json& spec, const Json& config) const = 0;
  /// Extra NVRTC options (arch, language standard and -v are cujit's).
  virtual std::vector<std::string> compile_options(const Json&, const Json&) const { return {}; }
  /// Byte offsets within the kernel's parameter struct of pointers to index
  /// metadata such as lengths and block tables. Loads through them give
  /// indices, not data: cujit-sass does not flag a branch on them (a length
  /// is like a shape). Stored with each compiled variant in the cache.
  virtual std::vector<int> index_param_offsets(const Json& /*spec*/, const Json& /*config*/) const { return {}; }
  /// The alignment of the kernel's parameter struct: the struct starts at
  /// the parameter bank's base rounded up to it, which cujit-sass needs to
  /// find the index parameters (a 64-byte-aligned struct of TMA descriptors
  /// starts past the base on sm_90).
  virtual int params_alignment(const Json& /*spec*/, const Json& /*config*/) const { return 8; }
  /// Every load of the kernel reads index metadata, never an input tensor
  /// (a step that turns sequence lengths into a tile list): cujit-sass then
  /// counts what it loads, staged through shared memory or not, as indices.
  virtual bool reads_only_index_data(const Json& /*spec*/, const Json& /*config*/) const { return false; }
  /// Its runs stream more than they compute (decode over a KV cache): the
  /// tuner times them after scrubbing L2, as a model step finds its cache in
  /// DRAM; timed back to back, a cache that fits in L2 would be served from
  /// there and favour the configs that are best at that.
  virtual bool memory_bound() const { return false; }
};

}  // namespace jit
