// jit::time_on_stream: autotune's timing loop (autotune/timing.h) over CUDA
// events on the caller's stream.
#include "jit/timing.h"

#include <utility>

#include "jit/driver.h"
#include "jit/timing_clock.h"

namespace jit {
namespace detail {

Event::Event() { CUJIT_CU_CHECK(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (event_) driver().cuEventDestroy(event_);
}
Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEventClock::CudaEventClock(Stream stream, bool flush_l2, L2Flush kind)
    : stream_(reinterpret_cast<CUstream>(stream)) {
  if (flush_l2) scrub_.emplace(kind);
}

void CudaEventClock::reserve(int count) {
  while (int(starts_.size()) < count) {
    starts_.emplace_back();
    stops_.emplace_back();
  }
}
void CudaEventClock::record_start(int pair) { CUJIT_CU_CHECK(driver().cuEventRecord(starts_[pair].get(), stream_)); }
void CudaEventClock::record_stop(int pair) { CUJIT_CU_CHECK(driver().cuEventRecord(stops_[pair].get(), stream_)); }
void CudaEventClock::wait(int pair) { CUJIT_CU_CHECK(driver().cuEventSynchronize(stops_[pair].get())); }
double CudaEventClock::elapsed_us(int pair) {
  float ms = 0;
  CUJIT_CU_CHECK(driver().cuEventElapsedTime(&ms, starts_[pair].get(), stops_[pair].get()));
  return 1000.0 * ms;
}
void CudaEventClock::flush_l2() {
  if (scrub_) scrub_->run(reinterpret_cast<Stream>(stream_));
}

}  // namespace detail

Timing time_on_stream(const std::function<void()>& fn, Stream stream, const TimingOptions& options) {
  detail::CudaEventClock clock(stream, options.flush_l2, options.l2_flush);
  return autotune::time_runs(clock, fn, options);
}

}  // namespace jit
