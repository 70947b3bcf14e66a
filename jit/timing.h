/// @file timing.h
/// Event timing on a stream, as the autotuner and the benchmark do it.
#pragma once
#include <functional>

#include "core/timing_options.h"
#include "jit/kernel_family.h"

namespace jit {

/// Runs fn (which must only enqueue work on `stream`) repeatedly, each run
/// between two CUDA events, and returns the median. Synchronizes the stream.
Timing time_on_stream(const std::function<void()>& fn, Stream stream, const TimingOptions& options = {});

}  // namespace jit
