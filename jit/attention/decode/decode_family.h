// The split-KV decode family (mma.sync, cp.async: sm_80 and newer):
// kernel_src/attention/decode/. It serves KV-cache problems (jit/serving.h)
// and dense problems with few query rows per KV head.
#pragma once
#include "jit/attention/family_registry.h"

namespace jit::detail {

const AttentionFamily& decode_attention_family();
FamilyRegistration decode_registration();

// The most packed rows (query heads per KV head times new rows) for which a
// dense jit::attention call goes to the decode family.
constexpr std::int64_t kDecodeMaxDenseRows = 64;

}  // namespace jit::detail
