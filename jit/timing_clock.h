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
  // How flush_l2() scrubs, when a timing asks for it. The scrub's buffer is
  // allocated on the first flush. With `best_effort`, a buffer that cannot
  // be allocated leaves the runs unscrubbed (logged) instead of failing them:
  // what the tuner wants inside a process that holds most of the GPU's memory.
  struct ScrubSpec {
    L2Flush kind = L2Flush::overwrite;
    std::size_t bytes = L2Scrubber::kBenchmarkBytes;  // 0: tuning_scrub_bytes()
    bool best_effort = false;
  };
  CudaEventClock(Stream stream, ScrubSpec scrub);
  void reserve(int count) override;
  void record_start(int pair) override;
  void record_stop(int pair) override;
  void wait(int pair) override;
  double elapsed_us(int pair) override;
  void flush_l2() override;

 private:
  CUstream stream_;
  ScrubSpec scrub_spec_;
  bool scrub_failed_ = false;
  std::optional<L2Scrubber> scrub_;
  std::vector<Event> starts_, stops_;
};

}  // namespace jit::detail
