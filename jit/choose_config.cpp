// Step 5 of the call path: the config for a tune key, from memory, the tuning
// DB, or a tuning run.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <thread>

#include "autotune/prune.h"
#include "autotune/tuner.h"
#include "autotune/tuning_record.h"
#include "cache/cache_error.h"
#include "cache/tuning_db.h"
#include "jit/binary_cache.h"
#include "jit/device.h"
#include "jit/error.h"
#include "jit/timing.h"
#include "jit/knobs.h"
#include "jit/log.h"
#include "jit/nvrtc_compiler.h"
#include "jit/runtime_state.h"

namespace jit {
namespace {

bool in_space(const std::vector<Json>& space, const Json& config) {
  return std::find(space.begin(), space.end(), config) != space.end();
}

Json tune_now(const KernelFamily& family, const Json& spec, const Json& key, const detail::DeviceInfo& device,
              const autotune::PrunedSpace& space, const std::vector<autotune::TimedCandidate>& previous,
              const TuneRunner& run, Stream stream) {
  detail::log_info("tuning {} for {} on {}: {} candidates ({} pruned), compiling on {} threads", family.name(),
                   spec.dump(), device.target.device_name, space.kept.size(), space.pruned.size(),
                   std::max(1u, std::thread::hardware_concurrency()));
  for (const auto& [config, reason] : space.pruned) {
    detail::log_debug("pruned {}: {}", family.variant_name(spec, config), reason);
  }
  autotune::TuneHooks hooks;
  hooks.variant_name = [&](const Json& config) { return family.variant_name(spec, config); };
  hooks.compile = [&](const Json& config) { detail::obtain_binary(family, spec, config, device.target.arch); };
  hooks.time_us = [&](const Json& config) {
    const Kernel& kernel = get_kernel(family, spec, config);
    const double us = time_on_stream([&] { run(kernel, config, stream); }, stream).median_us;
    detail::log_debug("  {}: {:.1f} us", kernel.variant(), us);
    return us;
  };
  const autotune::TuneResult result =
      autotune::run_tuning(space.kept, hooks, previous, std::max(1u, std::thread::hardware_concurrency()));
  ++detail::counters().tuning_runs;
  if (!result.winner) {
    std::string why;
    for (const auto& c : result.candidates) why += fmt::format("\n  {}: {}", c.variant, c.error);
    throw Error(ErrorCode::Internal, fmt::format("no candidate of {} could run for {}:{}", family.name(), spec.dump(), why));
  }
  const autotune::TimedCandidate& best = result.candidates[*result.winner];
  detail::log_info("tuned {}: {} at {:.1f} us ({} timed now, {} reused)", key.dump(), best.variant, best.median_us,
                   result.timed, int(result.candidates.size()) - result.compiled);
  if (const auto& root = detail::cache_root()) {
    try {
      cache::TuningDb(*root).store(key, autotune::make_record(result.candidates, best.config));
    } catch (const cache::CacheError& e) {
      throw Error(ErrorCode::Cache, e.what());
    }
  }
  return best.config;
}

}  // namespace

Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                   Stream stream) {
  const detail::DeviceInfo& device = detail::current_device();
  const Json key = {{"family", family.name()}, {"arch", device.target.arch}, {"device", device.target.device_name},
                    {"spec", spec},           {"bucket", bucket},          {"cujit", detail::cujit_version()},
                    {"nvrtc", detail::nvrtc_version()}};
  const std::string memo_key = fmt::format("{}/{}", static_cast<const void*>(device.context), key.dump());
  static std::mutex mutex;  // one tuning at a time; others wait for its result
  static auto* memo = new std::map<std::string, Json>();
  std::lock_guard lock(mutex);
  if (auto it = memo->find(memo_key); it != memo->end()) return it->second;

  Json chosen;
  if (detail::knobs().autotune == detail::AutotuneMode::off) {
    chosen = family.default_config(spec, device.target);
    detail::log_info("CUJIT_AUTOTUNE=off: default config {} for {}", family.variant_name(spec, chosen), key.dump());
  } else {
    const autotune::PrunedSpace space = autotune::prune_space(family, spec, device.target);
    std::optional<Json> record;
    if (const auto& root = detail::cache_root()) record = cache::TuningDb(*root).load(key);
    if (record && record->contains("winner") && in_space(space.kept, (*record)["winner"])) {
      ++detail::counters().tuning_db_hits;
      chosen = (*record)["winner"];
      const std::vector<autotune::TimedCandidate> previous = autotune::record_candidates(*record);
      // A config space that grew since the record was made: time only what is new.
      const bool complete = std::all_of(space.kept.begin(), space.kept.end(), [&](const Json& c) {
        return std::any_of(previous.begin(), previous.end(), [&](const auto& p) { return p.config == c; });
      });
      if (!complete) chosen = tune_now(family, spec, key, device, space, previous, run, stream);
      else detail::log_debug("tuning DB hit for {}: {}", key.dump(), family.variant_name(spec, chosen));
    } else {
      chosen = tune_now(family, spec, key, device, space, {}, run, stream);
    }
  }
  (*memo)[memo_key] = chosen;
  return chosen;
}

}  // namespace jit
