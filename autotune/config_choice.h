// The config for a tune key: from this process's memo, the tuning DB, or a
// tuning run, as the policy (CUJIT_AUTOTUNE's mode, passed in as data)
// allows. The autotuner owns the whole job (memo, DB lookup, the
// cross-process lock, the loop, the record); the runtime supplies device
// facts as data and compiling, launching and event timing as hooks.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autotune/timing.h"
#include "autotune/tuning_log.h"
#include "cache/trusted_dir.h"
#include "core/kernel_family.h"

namespace jit::autotune {

// CUJIT_AUTOTUNE (README, "Environment knobs").
enum class Mode { full, fast, off, frozen };

// How many configs Mode::fast times: the default and the next ones.
inline constexpr std::size_t kFastShortlist = 4;

// What is known of the device and the call, as data.
struct ChoiceContext {
  Target target;                 // arch and device name go into the tune key
  const void* context = nullptr;  // tunings are per CUDA context
  Mode mode = Mode::full;
  unsigned compile_threads = 1;
  bool capturing = false;         // the stream is being captured into a CUDA graph
  std::optional<cache::TrustedDir> cache_root;  // checked; no tuning DB or lock without one
  std::vector<cache::TrustedDir> read_only_roots;  // CUJIT_CACHE_READONLY_DIRS: records read after cache_root's
  std::string cujit_version, nvrtc_version;         // part of the tune key
};

// What the autotuner needs the runtime to do.
struct ChoiceHooks {
  // Compiles a config into the disk cache; thread-safe, throws on failure.
  std::function<void(const Json& config)> compile;
  // Loads a config's kernel and returns one run of it on the stream (only
  // enqueues work there).
  std::function<std::function<void()>(const Json& config)> runner;
  // Event timing on that stream.
  EventClock* clock = nullptr;
  TuningLog log;
  std::function<void()> count_tuning_run, count_db_hit;
  // When set and true, a tuning run gives up between compiles and timings
  // and throws TuningCancelled, storing and memoizing nothing (a background
  // tuning at process exit).
  std::function<bool()> cancelled;
};

// No candidate could be compiled and timed; the message lists why, per variant.
class NoRunnableCandidate : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TuningCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The tune key: family, arch, device, spec, size bucket and versions.
Json tune_key(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context);

// Throws NoRunnableCandidate, cache::CacheError, or what a hook throws.
Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context,
                   const ChoiceHooks& hooks);

// The config when it is known without compiling or timing anything: this
// process's memo, the default under Mode::off, or a tuning record whose
// winner is still kept and which timed every candidate; else nullopt (a
// tuning run is needed). Never waits for a tuning in progress: what
// CUJIT_AUTOTUNE=background asks on a first call. Uses only `hooks.log`
// and `hooks.count_db_hit`.
std::optional<Json> known_config(const KernelFamily& family, const Json& spec, const Json& bucket,
                                 const ChoiceContext& context, const ChoiceHooks& hooks);

// The key under which this process keeps a choice (and runs at most one
// background tuning): the CUDA context and the tune key.
std::string memo_key(const KernelFamily& family, const Json& spec, const Json& bucket, const ChoiceContext& context);

}  // namespace jit::autotune
