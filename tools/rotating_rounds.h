// Several calls timed in rounds that rotate which goes first, so that clock
// and thermal drift during a run move every call alike: the benchmarks'
// ratios between calls (cujit-varlen-bench, cujit-serving-bench) are medians
// of the rounds' ratios.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "autotune/selection.h"
#include "jit/timing.h"

namespace rotating_rounds {

struct RoundTimes {
  std::vector<std::vector<double>> us;  // [round][call]: each call's median time in that round

  double median_us(std::size_t call) const {
    std::vector<double> samples;
    for (const std::vector<double>& round : us) samples.push_back(round[call]);
    return jit::autotune::median(std::move(samples));
  }
  // The median over the rounds of call a's time over call b's.
  double median_ratio(std::size_t a, std::size_t b) const {
    std::vector<double> ratios;
    for (const std::vector<double>& round : us) ratios.push_back(round[a] / round[b]);
    return jit::autotune::median(std::move(ratios));
  }
};

// Round i times call (i + j) % calls.size() j-th, each with time_on_stream.
inline RoundTimes time_calls(const std::vector<std::function<void()>>& calls, int rounds, jit::Stream stream,
                             const jit::TimingOptions& timing) {
  RoundTimes times;
  for (int i = 0; i < rounds; ++i) {
    std::vector<double> round(calls.size());
    for (std::size_t j = 0; j < calls.size(); ++j) {
      const std::size_t k = (std::size_t(i) + j) % calls.size();
      round[k] = jit::time_on_stream(calls[k], stream, timing).median_us;
    }
    times.us.push_back(std::move(round));
  }
  return times;
}

}  // namespace rotating_rounds
