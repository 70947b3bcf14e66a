/// @file attention_inspect.h
/// Looking inside jit::attention, for benchmarks and tools: the launches a
/// call makes, every config the autotuner keeps, a call with a config of the
/// caller's choice, and the host-side checks on their own. Nothing here is
/// needed to use attention().
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "jit/attention.h"

namespace jit {

/// One kernel launch of a call.
struct AttentionLaunch {
  LaunchGeometry geometry;
  std::size_t params_bytes = 0;  ///< the kernel's by-value parameter struct
  std::size_t params_align = 0;  ///< and its alignment
};

/// The launches attention() makes for this problem with `config` (a config
/// of the family plan_attention() names) on the current device, in order.
std::vector<AttentionLaunch> attention_launches(const TensorView& q, const TensorView& k, const TensorView& v,
                                                const TensorView& out, const AttentionOptions& options,
                                                const Json& config);

/// Every config the autotuner would time for this problem on the current
/// device (the serving family's space after pruning), in config-space order,
/// each with its family and variant name.
std::vector<AttentionPlan> attention_candidates(const TensorView& q, const TensorView& k, const TensorView& v,
                                                const TensorView& out, const AttentionOptions& options);

/// attention() with `config` instead of the tuned one, as a call that only
/// enqueues work on options.stream: the kernels are compiled and loaded, and
/// the launches planned, before this returns. The tensors must outlive it.
std::function<void()> attention_call_with_config(const TensorView& q, const TensorView& k, const TensorView& v,
                                                 const TensorView& out, const AttentionOptions& options,
                                                 const Json& config);

/// The argument checks of a call on their own (no GPU); throws as attention().
void check_attention_arguments(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options);

/// The check that q, k, v, out and options.lse are memory of the current
/// context's GPU, on its own (a driver query per tensor); throws as attention().
void check_attention_placement(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options);

}  // namespace jit
