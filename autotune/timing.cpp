#include "autotune/timing.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "autotune/selection.h"

namespace jit::autotune {

Timing time_runs(EventClock& clock, const std::function<void()>& fn, const TimingOptions& options) {
  auto flush = [&] {
    if (options.flush_l2) clock.flush_l2();
  };
  for (int i = 0; i < options.warmup; ++i) fn();
  // Pair 0: one timed run sizes the repetition count.
  clock.reserve(1);
  flush();
  clock.record_start(0);
  fn();
  clock.record_stop(0);
  clock.wait(0);
  const double probe_ms = std::max(1e-3, clock.elapsed_us(0) / 1000.0);
  const int reps = std::clamp(int(options.target_ms / probe_ms), options.min_reps, options.max_reps);

  clock.reserve(1 + reps);
  for (int i = 1; i <= reps; ++i) {
    flush();
    clock.record_start(i);
    fn();
    clock.record_stop(i);
  }
  clock.wait(reps);
  std::vector<double> samples;
  for (int i = 1; i <= reps; ++i) samples.push_back(clock.elapsed_us(i));
  Timing t;
  t.reps = reps;
  t.min_us = *std::min_element(samples.begin(), samples.end());
  t.median_us = median(std::move(samples));
  return t;
}

}  // namespace jit::autotune
