// What TimingOptions::flush_l2 runs before each timed run, so the run finds
// none of its inputs in L2. Two kinds (core/timing_options.h, L2Flush):
// overwriting a 256 MiB buffer, as triton.testing.do_bench does, leaves L2
// full of dirty lines that the timed run then writes back (on an H100 about
// 10 us of every short memory-bound run: a decode of 134 MB took 58.8 us
// after a memset and 48.8 us after a read); reading the buffer leaves L2
// full of clean lines, so the run pays for its own traffic only.
#pragma once
#include <cstddef>

#include "core/timing_options.h"
#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit::detail {

// The read scrub's kernel (kernel_src/common/l2_scrub.cu): one variant.
const KernelFamily& l2_scrub_family();

class L2Scrubber {
 public:
  // What jit::time_on_stream scrubs: more than any L2 so far.
  static constexpr std::size_t kBenchmarkBytes = std::size_t(256) << 20;

  // Allocates (and zero-fills) `bytes`; a read scrub also loads its kernel.
  L2Scrubber(L2Flush kind, std::size_t bytes);
  void run(Stream stream) const;

 private:
  L2Flush kind_;
  DeviceBuffer buffer_;
  DeviceBuffer sink_;
  const Kernel* kernel_ = nullptr;
  LaunchGeometry geometry_;
};

// Twice the current device's L2 (at least 64 MiB): enough to push out what
// a run read, small enough to borrow while a process tunes.
std::size_t tuning_scrub_bytes();

}  // namespace jit::detail
