#include "jit/timing.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "autotune/selection.h"
#include "jit/driver.h"
#include "jit/tensor.h"

namespace jit {
namespace {

class Event {
 public:
  Event() { CUJIT_CU_CHECK(detail::driver().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
  ~Event() {
    if (event_) detail::driver().cuEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

double elapsed_us(const Event& start, const Event& stop) {
  float ms = 0;
  CUJIT_CU_CHECK(detail::driver().cuEventElapsedTime(&ms, start.get(), stop.get()));
  return 1000.0 * ms;
}

}  // namespace

Timing time_on_stream(const std::function<void()>& fn, Stream stream, const TimingOptions& options) {
  const detail::DriverApi& cu = detail::driver();
  const auto s = reinterpret_cast<CUstream>(stream);
  DeviceBuffer scrub(options.flush_l2 ? std::size_t(256) << 20 : 0);
  auto flush = [&] {
    if (options.flush_l2) CUJIT_CU_CHECK(cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(scrub.data()), 0, scrub.size(), s));
  };
  for (int i = 0; i < options.warmup; ++i) fn();
  // One timed run sizes the repetition count.
  Event probe_start, probe_stop;
  flush();
  CUJIT_CU_CHECK(cu.cuEventRecord(probe_start.get(), s));
  fn();
  CUJIT_CU_CHECK(cu.cuEventRecord(probe_stop.get(), s));
  CUJIT_CU_CHECK(cu.cuEventSynchronize(probe_stop.get()));
  const double probe_ms = std::max(1e-3, elapsed_us(probe_start, probe_stop) / 1000.0);
  const int reps = std::clamp(int(options.target_ms / probe_ms), options.min_reps, options.max_reps);

  std::vector<Event> starts(reps), stops(reps);
  for (int i = 0; i < reps; ++i) {
    flush();
    CUJIT_CU_CHECK(cu.cuEventRecord(starts[i].get(), s));
    fn();
    CUJIT_CU_CHECK(cu.cuEventRecord(stops[i].get(), s));
  }
  CUJIT_CU_CHECK(cu.cuEventSynchronize(stops[reps - 1].get()));
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) samples.push_back(elapsed_us(starts[i], stops[i]));
  Timing t;
  t.reps = reps;
  t.min_us = *std::min_element(samples.begin(), samples.end());
  t.median_us = autotune::median(std::move(samples));
  return t;
}

}  // namespace jit
