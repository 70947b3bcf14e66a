// Kernel families that implement attention, and how jit::attention picks one.
#pragma once
#include <string>

#include "jit/attention_problem.h"
#include "jit/kernel_family.h"

namespace jit::detail {

// How one config of a problem launches: fixed per problem shape, so the hot
// path computes it once.
struct AttnLaunch {
  LaunchGeometry geometry;
  int block_m = 0;  // query rows per tile
  int block_n = 0;  // keys per K/V block
  int schedule = 0;  // the family's own per-shape scheduling choice (sm90: a TileOrder)
};

// The tensors of one call.
struct AttnTensors {
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  const TensorView& out;
  float* lse;
};

// An attention family: a KernelFamily that also knows which problems it
// serves and how to launch them.
class AttentionFamily : public KernelFamily {
 public:
  // `problem` has passed validate_attention (so its tensors' strides and
  // addresses are 16-byte multiples).
  virtual bool supports(const AttnProblem& problem, const Target& target) const = 0;
  virtual AttnLaunch plan(const AttnProblem& problem, const Json& config) const = 0;
  // Builds the kernel's parameters for these tensors and launches.
  virtual void launch(const Kernel& kernel, const AttnLaunch& launch, const AttnProblem& problem,
                      const AttnTensors& tensors, Stream stream) const = 0;
  // The specialization of a problem (dtype, head dim, causal), as JSON and back.
  static Json spec_of(const AttnProblem& problem);
  struct Spec {
    std::string dtype;  // "f16" | "bf16"
    int d;
    bool causal;
  };
  static Spec spec_from(const Json& spec);
};

// The portable family (mma.sync, cp.async): sm_80 and newer.
const AttentionFamily& portable_attention_family();
// The Hopper family (TMA, wgmma, warp specialization): sm_90a.
const AttentionFamily& sm90_attention_family();

// The family for a problem on a target: the fastest that supports it, with a
// log line when the preferred one does not; Error(Unsupported) when none fits.
const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target);

// Kernel sources embedded at build time, shared by the attention families.
const KernelSources& attention_sources(const std::string& entry);

}  // namespace jit::detail
