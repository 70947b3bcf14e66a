// The steps of jit::attention's call path (attention.cpp) that a ragged
// batch's plan (varlen_plan.cpp) takes too: the device checks, the call's
// tensors, and the tuned, loaded plan of a problem.
#pragma once
#include <memory>
#include <string>

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

// A problem's family and loaded plan (steps 3-5): from the table of exact
// problems seen on this context, else chosen (tuning on the first call of a
// shape class, on `stream`, with `t`'s inputs) and kept.
struct Launchable {
  const AttentionFamily* family;
  AttnPlan plan;
  // What the plan was made from (a pointer: the hot path copies a Launchable
  // on every call, and only a plan's description reads it).
  std::shared_ptr<const Json> config;

  Launchable(const AttentionFamily& f, AttnPlan p, const Json& c)
      : family(&f), plan(p), config(std::make_shared<const Json>(c)) {}
  std::string variant_name(const AttnProblem& problem) const {
    return family->variant_name(family->spec_for(problem), *config);
  }
};
Launchable launchable_for(const AttnProblem& problem, const AttnTensors& t, Stream stream, const DeviceInfo& device);

}  // namespace jit::detail
