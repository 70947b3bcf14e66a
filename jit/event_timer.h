// Times a launch with CUDA events on a stream: warm-up, then enough
// repetitions for ~target milliseconds, median of per-launch times.
#pragma once
#include <functional>

#include "jit/kernel_family.h"

namespace jit::detail {

struct TimingPolicy {
  int warmup = 2;
  int min_reps = 5;
  int max_reps = 50;
  double target_ms = 30;  // total timed work per candidate
};

double median_launch_us(const std::function<void()>& launch, Stream stream, const TimingPolicy& policy = {});

}  // namespace jit::detail
