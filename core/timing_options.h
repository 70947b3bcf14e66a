/// @file timing_options.h
/// How a run is timed on a stream (repetitions, warm-up, L2 scrub) and what
/// comes back: plain data shared by the autotuner's timing loop
/// (autotune/timing.h) and the public jit::time_on_stream (jit/timing.h).
#pragma once

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

}  // namespace jit
