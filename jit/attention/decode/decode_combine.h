// The decode family's second pass (kernel_src/attention/decode/
// attn_decode_combine.cu) as a kernel family of its own: spec {"dtype", "d"},
// one config.
#pragma once
#include <cstdint>

#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit::detail {

const KernelFamily& decode_combine_family();
Json decode_combine_spec(DType dtype, int head_dim);

// One CTA of cujit::kDecodeCombineThreads per packed row.
LaunchGeometry decode_combine_geometry(std::int64_t packed_rows);

}  // namespace jit::detail
