/// @file timing_options.h
/// How a run is timed on a stream (repetitions, warm-up, L2 scrub) and what
/// comes back: plain data shared by the autotuner's timing loop
/// (autotune/timing.h) and the public jit::time_on_stream (jit/timing.h).
#pragma once

namespace jit {

/// How flush_l2 empties L2 (jit/l2_scrub.h says why there are two).
enum class L2Flush {
  overwrite,  ///< a 256 MiB memset, as triton.testing.do_bench: L2 is left dirty
  read,       ///< a kernel reads 256 MiB: L2 is left clean
};

struct TimingOptions {
  int warmup = 2;           ///< untimed runs first
  int min_reps = 5;
  int max_reps = 50;
  double target_ms = 30;    ///< timed work to aim for, sizes the repetition count
  bool flush_l2 = false;    ///< scrub L2 before every timed run
  L2Flush l2_flush = L2Flush::overwrite;
};

struct Timing {
  double median_us = 0;
  double min_us = 0;
  int reps = 0;
};

}  // namespace jit
