// The portable attention family (mma.sync, ldmatrix, cp.async: sm_80 and
// newer): kernel_src/attention/portable/.
#pragma once
#include "jit/attention/family_registry.h"

namespace jit::detail {

const AttentionFamily& portable_attention_family();
FamilyRegistration portable_registration();

}  // namespace jit::detail
