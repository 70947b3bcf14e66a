/// @file timing.h
/// Event timing on a stream, as the autotuner and the benchmark do it.
#pragma once
#include <functional>

#include "jit/kernel_family.h"

namespace jit {

struct TimingOptions {
  int warmup = 2;           ///< untimed runs first
  int min_reps = 5;
  int max_reps = 50;
  double target_ms = 30;    ///< timed work to aim for, sizes the repetition count
  bool flush_l2 = false;    ///< overwrite a 256 MiB buffer before every timed run
};

struct Timing {
  double median_us = 0;
  double min_us = 0;
  int reps = 0;
};

/// Runs fn (which must only enqueue work on `stream`) repeatedly, each run
/// between two CUDA events, and returns the median. Synchronizes the stream.
Timing time_on_stream(const std::function<void()>& fn, Stream stream, const TimingOptions& options = {});

}  // namespace jit
