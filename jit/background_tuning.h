// CUJIT_AUTOTUNE=background, the runtime's side: the process's one
// background tuner (autotune/background_tuner.h) and the two questions the
// call path asks the autotuner in that mode: is the config already known
// (no tuning, no waiting), and, on the worker, choose it (a tuning that
// gives up when the process exits).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "autotune/background_tuner.h"
#include "jit/kernel_family.h"

namespace jit::detail {

// True when CUJIT_AUTOTUNE=background.
bool background_tuning_enabled();

// The worker, started on first use; joined at process exit after the
// running tuning gives up (see autotune/background_tuner.h).
autotune::BackgroundTuner& background_tuner();

// choose_config, giving up between compiles and timings once `cancelled`
// returns true (Error(Internal) then; nothing recorded).
Json choose_config_until(const KernelFamily& family, const Json& spec, const Json& bucket, const TuneRunner& run,
                         Stream stream, const std::function<bool()>& cancelled);

// autotune::known_config for the current device: the memo's or a settling
// tuning record's config, else nullopt; compiles and times nothing.
std::optional<Json> known_config(const KernelFamily& family, const Json& spec, const Json& bucket, Stream stream);

// One key per tuning: the CUDA context and the tune key.
std::string tuning_slot(const KernelFamily& family, const Json& spec, const Json& bucket);

}  // namespace jit::detail
