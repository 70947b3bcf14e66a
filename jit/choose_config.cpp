// Step 5 of the call path: jit::choose_config, the runtime's side of
// autotune::choose_config (autotune/config_choice.h): device facts and
// CUJIT_AUTOTUNE as data; compiling, loading and CUDA-event timing as hooks.
#include <fmt/format.h>

#include "autotune/config_choice.h"
#include "autotune/tuner.h"
#include "cache/cache_error.h"
#include "jit/background_tuning.h"
#include "jit/binary_cache.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/log.h"
#include "jit/nvrtc_compiler.h"
#include "jit/runtime_state.h"
#include "jit/timing_clock.h"

namespace jit {
namespace {

autotune::Mode mode_of(detail::AutotuneMode mode) {
  switch (mode) {
    case detail::AutotuneMode::fast: return autotune::Mode::fast;
    case detail::AutotuneMode::off: return autotune::Mode::off;
    case detail::AutotuneMode::frozen: return autotune::Mode::frozen;
    case detail::AutotuneMode::full:
    case detail::AutotuneMode::background: break;  // the worker tunes as `full` does
  }
  return autotune::Mode::full;
}

// The autotuner's view of this call: device facts and CUJIT_AUTOTUNE as
// data; compiling, loading and event timing on `stream` as hooks.
struct Choice {
  autotune::ChoiceContext context;
  detail::CudaEventClock clock;
  autotune::ChoiceHooks hooks;

  Choice(const KernelFamily& family, const Json& spec, const TuneRunner& run, Stream stream)
      : clock(stream, {L2Flush::read, /*bytes: tuning_scrub_bytes()=*/0, /*best_effort=*/true}) {
    const detail::DeviceInfo& device = detail::current_device();
    context.target = device.target;
    context.context = device.context;
    context.mode = mode_of(detail::knobs().autotune);
    context.compile_threads = detail::knobs().compile_threads;
    context.capturing = detail::stream_is_capturing(stream);
    // Without tuning the DB is not read (nor the cache directory resolved here).
    if (context.mode != autotune::Mode::off) {
      context.cache_root = detail::cache_root_dir();
      context.read_only_roots = detail::read_only_cache_roots();
    }
    context.cujit_version = detail::cujit_version();
    context.nvrtc_version = detail::nvrtc_version();
    const std::string arch = device.target.arch;
    hooks.compile = [&family, spec, arch](const Json& config) {
      const detail::ResourceUsage usage = detail::obtain_binary(family, spec, config, arch).usage;
      if (usage.spill_bytes() > 0) {
        throw autotune::SpillingCandidate(
            fmt::format("spills {} bytes at {} registers", usage.spill_bytes(), usage.registers));
      }
    };
    hooks.runner = [&family, spec, &run, stream](const Json& config) -> std::function<void()> {
      const Kernel& kernel = get_kernel(family, spec, config);
      return [&run, &kernel, config, stream] { run(kernel, config, stream); };
    };
    hooks.clock = &clock;
    hooks.log.level = int(detail::knobs().log_level);
    hooks.log.write = [](int level, const std::string& line) { detail::write_log_line(detail::LogLevel(level), line); };
    hooks.count_tuning_run = [] { ++detail::counters().tuning_runs; };
    hooks.count_db_hit = [] { ++detail::counters().tuning_db_hits; };
  }
};

// Runs `choose` with the autotuner's errors as jit::Error.
template <class Choose>
auto translating_errors(Choose&& choose) {
  try {
    return choose();
  } catch (const autotune::NoRunnableCandidate& e) {
    throw Error(ErrorCode::Internal, e.what());
  } catch (const autotune::TuningCancelled& e) {
    throw Error(ErrorCode::Internal, e.what());
  } catch (const cache::CacheError& e) {
    throw Error(ErrorCode::Cache, e.what());
  }
}

}  // namespace

Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                   Stream stream) {
  return detail::choose_config_until(family, spec, bucket, run, stream, nullptr);
}

namespace detail {

Json choose_config_until(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                         Stream stream, const std::function<bool()>& cancelled) {
  return translating_errors([&] {
    Choice choice(family, spec, run, stream);
    choice.hooks.cancelled = cancelled;
    return autotune::choose_config(family, spec, bucket, choice.context, choice.hooks);
  });
}

std::optional<Json> known_config(const KernelFamily& family, const Json& spec, const Json& bucket, Stream stream) {
  return translating_errors([&] {
    const TuneRunner none;
    Choice choice(family, spec, none, stream);
    return autotune::known_config(family, spec, bucket, choice.context, choice.hooks);
  });
}

std::string tuning_slot(const KernelFamily& family, const Json& spec, const Json& bucket) {
  autotune::ChoiceContext context;
  const DeviceInfo& device = current_device();
  context.target = device.target;
  context.context = device.context;
  context.cujit_version = cujit_version();
  context.nvrtc_version = nvrtc_version();
  return autotune::memo_key(family, spec, bucket, context);
}

}  // namespace detail
}  // namespace jit
