// The floor of event timing: an empty kernel launched and timed the way a
// real kernel is (event, launch, event), so a measured time can be read
// against what launching alone costs. Shared by cujit-bench (--latency,
// --host-overhead) and cujit-serving-bench.
#pragma once
#include <cstddef>

#include "jit/cujit.h"

namespace launch_floor {

/// An empty kernel whose only parameter is a by-value struct of `params_bytes`
/// bytes aligned to `params_align`, as the attention kernels take theirs:
/// launching it costs what any launch with such a parameter costs, and nothing
/// more. Compiled (or read from the cache) and loaded on first use.
const jit::Kernel& empty_kernel(std::size_t params_bytes, std::size_t params_align);

/// Small shapes' timing: many short repetitions, with or without the 256 MiB
/// scrub before each (as the grid and the peer benchmark time).
jit::TimingOptions latency_timing(bool scrub_l2);

/// Median event-timed microseconds of the empty kernel launched with
/// `geometry` on `stream`.
double empty_kernel_us(std::size_t params_bytes, std::size_t params_align, const jit::LaunchGeometry& geometry,
                       const jit::TimingOptions& timing, jit::Stream stream = nullptr);

/// One 128-thread CTA: the geometry of --latency's "empty 1 CTA" column.
jit::LaunchGeometry one_cta();

}  // namespace launch_floor
