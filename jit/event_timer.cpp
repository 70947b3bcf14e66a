#include "jit/event_timer.h"

#include <algorithm>
#include <vector>

#include "autotune/selection.h"
#include "jit/driver.h"

namespace jit::detail {
namespace {

class Event {
 public:
  Event() { CUJIT_CU_CHECK(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
  ~Event() { driver().cuEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

float elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0;
  CUJIT_CU_CHECK(driver().cuEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

}  // namespace

double median_launch_us(const std::function<void()>& launch, Stream stream, const TimingPolicy& policy) {
  const DriverApi& cu = driver();
  const auto s = reinterpret_cast<CUstream>(stream);
  for (int i = 0; i < policy.warmup; ++i) launch();
  // One timed launch sizes the repetition count.
  Event probe_start, probe_stop;
  CUJIT_CU_CHECK(cu.cuEventRecord(probe_start.get(), s));
  launch();
  CUJIT_CU_CHECK(cu.cuEventRecord(probe_stop.get(), s));
  CUJIT_CU_CHECK(cu.cuEventSynchronize(probe_stop.get()));
  const double probe_ms = std::max(1e-3, double(elapsed_ms(probe_start, probe_stop)));
  const int reps = std::clamp(int(policy.target_ms / probe_ms), policy.min_reps, policy.max_reps);

  std::vector<Event> events(reps + 1);
  CUJIT_CU_CHECK(cu.cuEventRecord(events[0].get(), s));
  for (int i = 0; i < reps; ++i) {
    launch();
    CUJIT_CU_CHECK(cu.cuEventRecord(events[i + 1].get(), s));
  }
  CUJIT_CU_CHECK(cu.cuEventSynchronize(events[reps].get()));
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) samples.push_back(1000.0 * elapsed_ms(events[i], events[i + 1]));
  return autotune::median(std::move(samples));
}

}  // namespace jit::detail
