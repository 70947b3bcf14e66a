// The timing loop: warm-up runs, one probe that sizes the repetition count,
// then timed repetitions and their median. The events themselves are the
// runtime's (CUDA events in jit/timing.cpp), behind EventClock, so this
// module needs no GPU and its arithmetic is tested on the CPU.
#pragma once
#include <functional>

#include "core/timing_options.h"

namespace jit::autotune {

// Event pairs on one stream, numbered from 0.
class EventClock {
 public:
  virtual ~EventClock() = default;
  // Pairs 0 .. count-1 exist afterwards (earlier ones are kept).
  virtual void reserve(int count) = 0;
  virtual void record_start(int pair) = 0;
  virtual void record_stop(int pair) = 0;
  // Waits until pair's stop event has completed.
  virtual void wait(int pair) = 0;
  virtual double elapsed_us(int pair) = 0;
  // Enqueues the L2 scrub (TimingOptions::flush_l2) before a timed run.
  virtual void flush_l2() = 0;
};

// Runs fn (which must only enqueue work on the clock's stream)
// options.warmup times untimed, once timed to size the repetition count
// (target_ms / probe, clamped to [min_reps, max_reps]), then that many times
// between event pairs; returns their median and minimum.
Timing time_runs(EventClock& clock, const std::function<void()>& fn, const TimingOptions& options);

}  // namespace jit::autotune
