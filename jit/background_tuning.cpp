#include "jit/background_tuning.h"

#include <atomic>

#include "jit/driver.h"
#include "jit/knobs.h"
#include "jit/log.h"
#include "jit/nvrtc_compiler.h"
#include "jit/runtime_state.h"

namespace jit {
namespace detail {
namespace {

std::atomic<autotune::BackgroundTuner*> started{nullptr};  // set once the worker exists

}  // namespace

bool background_tuning_enabled() { return knobs().autotune == AutotuneMode::background; }

autotune::BackgroundTuner& background_tuner() {
  // What the worker uses is initialized first, so it is destroyed after the
  // tuner (statics go in reverse order), and the worker never sees it gone.
  static autotune::BackgroundTuner& tuner = [&]() -> autotune::BackgroundTuner& {
    (void)driver();
    (void)knobs();
    (void)counters();
    (void)cache_state();
    (void)nvrtc_version();
    autotune::TuningLog log;
    log.level = int(knobs().log_level);
    log.write = [](int level, const std::string& line) { write_log_line(LogLevel(level), line); };
    static autotune::BackgroundTuner instance(std::move(log));
    started.store(&instance, std::memory_order_release);
    return instance;
  }();
  return tuner;
}

}  // namespace detail

void wait_for_background_tuning() {
  // Never starts the worker (nor needs a GPU) when no tuning was started.
  if (autotune::BackgroundTuner* tuner = detail::started.load(std::memory_order_acquire)) tuner->wait_idle();
}

}  // namespace jit
