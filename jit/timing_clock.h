// CUDA events on one stream behind autotune's EventClock: what
// jit::time_on_stream and the tuner time with.
#pragma once
#include <cuda.h>

#include <optional>
#include <vector>

#include "autotune/timing.h"
#include "jit/kernel_family.h"
#include "jit/l2_scrub.h"
#include "jit/tensor.h"

namespace jit::detail {

// One CUevent, move-only.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

class CudaEventClock final : public autotune::EventClock {
 public:
  // With flush_l2, owns the scrub (its 256 MiB buffer) flush_l2() runs.
  CudaEventClock(Stream stream, bool flush_l2, L2Flush kind = L2Flush::overwrite);
  void reserve(int count) override;
  void record_start(int pair) override;
  void record_stop(int pair) override;
  void wait(int pair) override;
  double elapsed_us(int pair) override;
  void flush_l2() override;

 private:
  CUstream stream_;
  std::optional<L2Scrubber> scrub_;
  std::vector<Event> starts_, stops_;
};

}  // namespace jit::detail
