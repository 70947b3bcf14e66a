// CUJIT_AUTOTUNE=background for jit::attention: the tuning job of a shape
// class, run on the worker thread on its own CUDA stream and its own
// zero-filled q, k, v, out and workspace of the problem's shape, never on
// the caller's stream or buffers (which may be gone by the time it runs).
#pragma once
#include <memory>

#include "autotune/background_tuner.h"
#include "jit/attention/attention_family.h"
#include "jit/device.h"

namespace jit::detail {

// Queues the tuning of (family, spec, bucket) unless it was queued before
// in this process; the ticket says when its winner is ready. `problem` is a
// plain (not ragged) problem of that class.
std::shared_ptr<const autotune::TuningTicket> start_background_tuning(const AttentionFamily& family, const Json& spec,
                                                                      const Json& bucket, const AttnProblem& problem,
                                                                      const DeviceInfo& device);

}  // namespace jit::detail
