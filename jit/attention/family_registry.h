// The attention families, in priority order, and how a problem finds one:
// the first registration that serves its target and problem, unless
// CUJIT_FAMILY forces one. A new family is one more registration in
// family_registry.cpp (and its own folder beside sm90/ and portable/).
#pragma once
#include <string>
#include <vector>

#include "jit/attention/attention_family.h"
#include "jit/knobs.h"
#include "kernel_src/attention/head_dims.h"

namespace jit::detail {

struct FamilyRegistration {
  const AttentionFamily* family;
  const char* short_name;     // the CUJIT_FAMILY value that forces it: "sm90"
  cujit::HeadDims head_dims;  // what it is instantiated for
  // True when the family runs on the target at all (whatever the problem).
  bool (*runs_on)(const Target& target);
  // What it needs, for the error when CUJIT_FAMILY forces it and it cannot
  // serve: "an sm_90a GPU (this is sm_89) and head dim 64, 128 or 256 (this
  // is 96)"; nullptr: the common "no attention kernel family" error instead.
  std::string (*requirements)(const AttnProblem& problem, const Target& target);
};

// Every registration, fastest first.
const std::vector<FamilyRegistration>& attention_families();

// The family for a problem on a target: the first that supports it, with a
// log line when one before it runs on the target but not this problem;
// Error(Unsupported) when none fits or the forced one does not.
// CUJIT_FAMILY (knobs().family) forces one by name.
const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target);
// The same with the forcing name given ("" for auto); a name no registration
// has is Error(InvalidArgument) listing the names there are.
const AttentionFamily& attention_family_for(const AttnProblem& problem, const Target& target,
                                            const std::string& forced_name);

// The family that serves a problem's first call while the tuned family
// (attention_family_for) is tuned in the background: the portable family
// where the tuned one is sm90 and the portable one serves the problem, as its
// default config compiles in about half the time (0.64 s against 1.2 s for
// D = 128 in NVRTC); the tuned family otherwise, and always when
// CUJIT_FAMILY forces one.
const AttentionFamily& first_call_family_for(const AttnProblem& problem, const Target& target);

// "64, 128, 256": a list of head dims for messages.
std::string head_dims_text(const cujit::HeadDims& dims, const char* last_separator = ", ");

}  // namespace jit::detail
