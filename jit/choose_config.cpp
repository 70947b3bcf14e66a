// Step 5 of the call path: the config for a tune key, from memory, the tuning
// DB, or a tuning run (CUJIT_AUTOTUNE says which are allowed).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "autotune/prune.h"
#include "autotune/tuner.h"
#include "autotune/tuning_record.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/file_lock.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "jit/binary_cache.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/log.h"
#include "jit/nvrtc_compiler.h"
#include "jit/runtime_state.h"
#include "jit/timing.h"

namespace jit {
namespace {

// How many configs CUJIT_AUTOTUNE=fast times: the default and the next ones.
constexpr std::size_t kFastShortlist = 4;

bool contains(const std::vector<Json>& configs, const Json& config) {
  return std::find(configs.begin(), configs.end(), config) != configs.end();
}

// The configs a tuning run times, in the order ties are broken.
std::vector<Json> candidates_for(detail::AutotuneMode mode, const KernelFamily& family, const Json& spec,
                                 const detail::DeviceInfo& device, const std::vector<Json>& kept) {
  if (mode != detail::AutotuneMode::fast) return kept;
  return autotune::shortlist(family.default_config(spec, device.target), kept, kFastShortlist);
}

Json tune_now(const KernelFamily& family, const Json& spec, const Json& key, const detail::DeviceInfo& device,
              const std::vector<Json>& candidates, std::size_t pruned,
              const std::vector<autotune::TimedCandidate>& previous, const TuneRunner& run, Stream stream) {
  const unsigned threads = detail::knobs().compile_threads;
  detail::log_info("tuning {} {} on {}: timing {} configs ({} pruned, {} timed before), compiling on {} threads",
                   family.name(), spec.dump(), device.target.device_name, candidates.size(), pruned, previous.size(),
                   threads);
  autotune::TuneHooks hooks;
  hooks.variant_name = [&](const Json& config) { return family.variant_name(spec, config); };
  hooks.compile = [&](const Json& config) { detail::obtain_binary(family, spec, config, device.target.arch); };
  hooks.time_us = [&](const Json& config) {
    const Kernel& kernel = get_kernel(family, spec, config);
    // One of kTimingRounds samples: a third of time_on_stream's usual budget.
    TimingOptions options;
    options.target_ms = 10;
    const double us = time_on_stream([&] { run(kernel, config, stream); }, stream, options).median_us;
    detail::log_debug("  {}: {:.1f} us", kernel.variant(), us);
    return us;
  };
  const autotune::TuneResult result = autotune::run_tuning(candidates, hooks, previous, threads);
  ++detail::counters().tuning_runs;
  if (!result.winner) {
    std::string why;
    for (const auto& c : result.candidates) why += fmt::format("\n  {}: {}", c.variant, c.error);
    throw Error(ErrorCode::Internal, fmt::format("no candidate of {} could run for {}:{}", family.name(), spec.dump(), why));
  }
  const autotune::TimedCandidate& best = result.candidates[*result.winner];
  detail::log_info("tuned {}: {} at {:.1f} us ({} timed now, {} reused)", key.dump(), best.variant, best.median_us,
                   result.timed, int(result.candidates.size()) - result.compiled);
  // Keep every timing ever taken for this key, including configs outside
  // today's candidate list, so a later full run re-times nothing.
  std::vector<autotune::TimedCandidate> all = result.candidates;
  for (const auto& p : previous) {
    if (std::none_of(all.begin(), all.end(), [&](const auto& c) { return c.config == p.config; })) all.push_back(p);
  }
  if (const auto& root = detail::cache_root_dir()) {
    // A record that cannot be written costs a re-tune in the next process,
    // never this call.
    try {
      cache::TuningDb(*root).store(key, autotune::make_record(all, best.config));
    } catch (const cache::UntrustedCacheDir&) {
      throw;
    } catch (const cache::CacheError& e) {
      detail::log_info("could not store the tuning record for {}: {}", key.dump(), e.what());
    }
  }
  return best.config;
}

// The DB's winner for `key` when it is still in the pruned space; the record's
// timings go to `previous`.
std::optional<Json> recorded_winner(const Json& key, const std::vector<Json>& kept,
                                    std::vector<autotune::TimedCandidate>& previous) {
  const auto& root = detail::cache_root_dir();
  if (!root) return std::nullopt;
  const std::optional<Json> record = cache::TuningDb(*root).load(key);
  if (!record) return std::nullopt;
  previous = autotune::record_candidates(*record);
  const auto it = record->find("winner");
  if (it == record->end() || !contains(kept, *it)) return std::nullopt;
  return *it;
}

Json choose_uncached(const KernelFamily& family, const Json& spec, const Json& key, const detail::DeviceInfo& device,
                     const TuneRunner& run, Stream stream) {
  const detail::AutotuneMode mode = detail::knobs().autotune;
  const Json fallback = family.default_config(spec, device.target);
  if (mode == detail::AutotuneMode::off) {
    detail::log_info("CUJIT_AUTOTUNE=off: default config {}", family.variant_name(spec, fallback));
    return fallback;
  }
  const autotune::PrunedSpace space = autotune::prune_space(family, spec, device.target);
  for (const auto& [config, reason] : space.pruned) {
    detail::log_debug("pruned {}: {}", family.variant_name(spec, config), reason);
  }
  std::vector<autotune::TimedCandidate> previous;
  std::optional<Json> winner = recorded_winner(key, space.kept, previous);
  auto untimed = [&](const std::vector<Json>& candidates) {
    return std::count_if(candidates.begin(), candidates.end(), [&](const Json& c) {
      return std::none_of(previous.begin(), previous.end(), [&](const auto& p) { return p.config == c; });
    });
  };
  const bool capturing = detail::stream_is_capturing(stream);
  if (mode == detail::AutotuneMode::frozen || capturing) {
    const char* why = capturing ? "the stream is being captured into a CUDA graph, so nothing is timed"
                                : "CUJIT_AUTOTUNE=frozen";
    const Json chosen = winner ? *winner : fallback;
    detail::log_info("{}: {} config {}", why, winner ? "tuning DB" : "default", family.variant_name(spec, chosen));
    if (winner) ++detail::counters().tuning_db_hits;
    return chosen;
  }
  const std::vector<Json> candidates = candidates_for(mode, family, spec, device, space.kept);
  // The record settles it when it has a winner and timed every candidate.
  auto settled_by_record = [&] {
    if (!winner || untimed(candidates) != 0) return false;
    ++detail::counters().tuning_db_hits;
    detail::log_debug("tuning DB hit for {}: {}", key.dump(), family.variant_name(spec, *winner));
    return true;
  };
  if (settled_by_record()) return *winner;
  // One tuning per key per cache directory: other processes wait here, then
  // find the record this one wrote.
  std::optional<cache::FileLock> lock;
  if (const auto& root = detail::cache_root_dir()) {
    try {
      lock.emplace(*root->open_subdir("locks", /*create=*/true), cache::sha256_hex(key.dump()) + ".lock");
    } catch (const cache::UntrustedCacheDir&) {
      throw;
    } catch (const cache::CacheError& e) {
      detail::log_info("tuning without the cross-process lock: {}", e.what());
    }
    winner = recorded_winner(key, space.kept, previous);
    if (settled_by_record()) return *winner;
  }
  return tune_now(family, spec, key, device, candidates, space.pruned.size(), previous, run, stream);
}

}  // namespace

Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                   Stream stream) {
  const detail::DeviceInfo& device = detail::current_device();
  const Json key = {{"family", family.name()}, {"arch", device.target.arch}, {"device", device.target.device_name},
                    {"spec", spec},           {"bucket", bucket},          {"cujit", detail::cujit_version()},
                    {"nvrtc", detail::nvrtc_version()}};
  const std::string memo_key = fmt::format("{}/{}", static_cast<const void*>(device.context), key.dump());
  // One tuning at a time in this process: other threads asking for a key
  // being tuned wait for its result instead of timing it again.
  static std::mutex mutex;
  static auto* memo = new std::map<std::string, Json>();
  std::lock_guard lock(mutex);
  if (auto it = memo->find(memo_key); it != memo->end()) return it->second;
  try {
    Json chosen = choose_uncached(family, spec, key, device, run, stream);
    // A choice made during graph capture is not final: the first call
    // outside a capture may still tune.
    if (!detail::stream_is_capturing(stream)) (*memo)[memo_key] = chosen;
    return chosen;
  } catch (const cache::CacheError& e) {
    throw Error(ErrorCode::Cache, e.what());
  }
}

}  // namespace jit
