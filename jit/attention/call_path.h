// The steps of jit::attention's call path (attention.cpp) that a ragged
// batch's plan (varlen_plan.cpp) takes too: the device checks, the call's
// tensors, and the tuned, loaded plan of a problem.
#pragma once
#include "jit/attention.h"
#include "jit/attention/attention_family.h"
#include "jit/attention/attention_problem.h"
#include "jit/device.h"
#include "jit/varlen.h"

namespace jit::detail {

// Where the arguments live, and the GPU for what they ask (steps 1-2 beyond
// the shapes).
void check_on_device(const AttnProblem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TensorView& out, const AttentionOptions& options, const DeviceInfo& device);

// The call's tensors, FP8 descale factors included.
AttnTensors tensors_of(const AttnProblem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& out, const AttentionOptions& options);

// A ragged batch's call: check_on_device and the prefix sums' placement,
// the tensors with the prefix sums, and (CUJIT_CHECK) their contents checked
// on `options.stream`.
AttnTensors checked_varlen_tensors(const AttnProblem& problem, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out, const VarlenBatch& batch,
                                   const AttentionOptions& options, const DeviceInfo& device);

// A problem's family, config and loaded plan (steps 3-5), chosen as a first
// call chooses them (tuning a new shape class on `stream` with `t`'s inputs)
// but kept by the caller: what a plan object holds, with its config to name.
// jit::attention's calls keep theirs in a table of exact problems.
struct ChosenPlan {
  const AttentionFamily* family;
  Json config;
  AttnPlan plan;
};
ChosenPlan chosen_plan(const AttnProblem& problem, const AttnTensors& t, Stream stream, const DeviceInfo& device);

}  // namespace jit::detail
