// jit::time_on_stream: autotune's timing loop (autotune/timing.h) over CUDA
// events on the caller's stream.
#include "jit/timing.h"

#include <utility>

#include "jit/driver.h"
#include "jit/error.h"
#include "jit/log.h"
#include "jit/timing_clock.h"

namespace jit {
namespace detail {

Event::Event() { CUJIT_CU_CHECK(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (event_) driver().cuEventDestroy(event_);
}
Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEventClock::CudaEventClock(Stream stream, ScrubSpec scrub)
    : stream_(reinterpret_cast<CUstream>(stream)), scrub_spec_(scrub) {}

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
  if (!scrub_ && !scrub_failed_) {
    const std::size_t bytes = scrub_spec_.bytes != 0 ? scrub_spec_.bytes : tuning_scrub_bytes();
    try {
      scrub_.emplace(scrub_spec_.kind, bytes);
    } catch (const Error& e) {
      if (!scrub_spec_.best_effort) throw;
      scrub_failed_ = true;
      log_info("timing without an L2 scrub: its {} MiB buffer could not be had ({})", bytes >> 20, e.what());
    }
  }
  if (scrub_) scrub_->run(reinterpret_cast<Stream>(stream_));
}

}  // namespace detail

Timing time_on_stream(const std::function<void()>& fn, Stream stream, const TimingOptions& options) {
  detail::CudaEventClock clock(stream, {options.l2_flush, detail::L2Scrubber::kBenchmarkBytes, false});
  return autotune::time_runs(clock, fn, options);
}

}  // namespace jit
