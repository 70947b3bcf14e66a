// The Hopper attention family (TMA, wgmma, warp specialization, persistent
// CTAs: sm_90a): kernel_src/attention/sm90/.
#pragma once
#include "jit/attention/family_registry.h"

namespace jit::detail {

const AttentionFamily& sm90_attention_family();
FamilyRegistration sm90_registration();

}  // namespace jit::detail
