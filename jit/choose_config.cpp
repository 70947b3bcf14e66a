// Step 5 of the call path: jit::choose_config, the runtime's side of
// autotune::choose_config (autotune/config_choice.h): device facts and
// CUJIT_AUTOTUNE as data; compiling, loading and CUDA-event timing as hooks.
#include "autotune/config_choice.h"
#include "cache/cache_error.h"
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
    case detail::AutotuneMode::full: break;
  }
  return autotune::Mode::full;
}

}  // namespace

Json choose_config(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                   Stream stream) {
  const detail::DeviceInfo& device = detail::current_device();
  try {
    autotune::ChoiceContext context;
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
    detail::CudaEventClock clock(
        stream, {L2Flush::read, family.memory_bound() ? detail::tuning_scrub_bytes() : 0, /*best_effort=*/true});
    autotune::ChoiceHooks hooks;
    hooks.compile = [&](const Json& config) { detail::obtain_binary(family, spec, config, device.target.arch); };
    hooks.runner = [&](const Json& config) -> std::function<void()> {
      const Kernel& kernel = get_kernel(family, spec, config);
      return [&run, &kernel, config, stream] { run(kernel, config, stream); };
    };
    hooks.clock = &clock;
    hooks.log.level = int(detail::knobs().log_level);
    hooks.log.write = [](int level, const std::string& line) { detail::write_log_line(detail::LogLevel(level), line); };
    hooks.count_tuning_run = [] { ++detail::counters().tuning_runs; };
    hooks.count_db_hit = [] { ++detail::counters().tuning_db_hits; };
    return autotune::choose_config(family, spec, bucket, context, hooks);
  } catch (const autotune::NoRunnableCandidate& e) {
    throw Error(ErrorCode::Internal, e.what());
  } catch (const cache::CacheError& e) {
    throw Error(ErrorCode::Cache, e.what());
  }
}

}  // namespace jit
