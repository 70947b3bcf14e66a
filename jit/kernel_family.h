/// @file kernel_family.h
/// The generic kernel-family API: how a family of JIT kernels (attention, or
/// one of your own) tells cujit what to compile, what to search and how to
/// name it. cujit does the rest: NVRTC, the disk cache, module loading,
/// autotuning and the tuning database. The family interface and its types
/// (KernelFamily, Target, KernelSources, LaunchGeometry) are in
/// core/kernel_family.h, which the autotuner shares.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/kernel_family.h"

namespace jit {

/// Target of an arch name with no device present (documented per-arch limits).
/// Throws Error(InvalidArgument) for an arch cujit does not know.
Target offline_target(const std::string& arch);

/// True when a CUDA driver and at least one GPU are present; never throws.
bool gpu_present();

/// The current device's target (device 0's primary context is made current
/// when no context is). Throws Error(NoDevice) without a GPU.
Target current_target();

/// Waits for all work on `stream` (cuStreamSynchronize).
void synchronize(Stream stream);

/// Where the disk cache lives; empty when there is no disk cache
/// (CUJIT_DISK_CACHE=0, or a directory that could not be used).
std::string cache_directory();

/// What the cache is doing, in one line: "disk: <path>", "off
/// (CUJIT_DISK_CACHE=0)", or "memory only: <reason>" when the cache directory
/// could not be created or written (permissions, read-only or full file
/// system): cujit then works without a disk cache, as with
/// CUJIT_DISK_CACHE=0. A directory that may not be trusted (a symbolic link,
/// owned by another user, writable by group or others) is never used:
/// this, cache_directory() and every call that needs the cache throw
/// Error(Cache) saying how to fix it. Each pre-warmed root of
/// CUJIT_CACHE_READONLY_DIRS that is served adds "; read-only: <path>".
std::string cache_status();

/// A variant compiled and loaded in the current CUDA context.
class Kernel {
 public:
  struct Impl;
  explicit Kernel(std::unique_ptr<Impl> impl);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& variant() const;
  int registers() const;
  /// How many CTAs of this geometry the driver would keep resident on one SM
  /// (cuOccupancyMaxActiveBlocksPerMultiprocessor, after the same shared
  /// memory opt-in a launch makes).
  int resident_ctas_per_sm(const LaunchGeometry& geometry) const;
  /// Launches with one by-value parameter struct (the kernel's only argument).
  void launch(const LaunchGeometry& geometry, const void* params, std::size_t params_size, Stream stream) const;
  template <class Params>
  void launch(const LaunchGeometry& geometry, const Params& params, Stream stream) const {
    launch(geometry, &params, sizeof(Params), stream);
  }

 private:
  std::unique_ptr<Impl> impl_;
};

/// Compiles (or finds in the cache) and loads a variant in the current
/// context, creating the device's primary context when none is current.
/// The reference stays valid for the life of the process.
const Kernel& get_kernel(const KernelFamily& family, const Json& spec, const Json& config);

/// Result of an offline compile.
struct CompileReport {
  std::string variant;
  std::string arch;
  bool from_cache = false;
  int registers = -1;
  int spill_bytes = 0;  ///< stores + loads
  double seconds = 0;
  bool wgmma_serialized = false;  ///< ptxas C7512/C7515: the kernel's wgmma run one at a time
};

/// Compiles a variant for `arch` into the disk cache; needs no GPU.
CompileReport compile_variant(const KernelFamily& family, const Json& spec, const Json& config,
                              const std::string& arch);

/// Runs one candidate once on scratch data: the autotuner calls it to time
/// each config. It must only enqueue work on `stream`.
using TuneRunner = std::function<void(const Kernel& kernel, const Json& config, Stream stream)>;

/// The config to use for `spec` on the current device: the in-memory table,
/// then the tuning DB on disk, then (per CUJIT_AUTOTUNE) a tuning run over the
/// pruned space, compiled in parallel and timed with `run`. `bucket` holds the
/// problem-size fields that make timings differ (it is part of the tune key).
Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                   Stream stream);

/// Counters for tests and tools.
struct Stats {
  long long nvrtc_compiles = 0;
  long long disk_cache_hits = 0;
  long long tuning_runs = 0;
  long long tuning_db_hits = 0;
};
Stats stats();

}  // namespace jit
