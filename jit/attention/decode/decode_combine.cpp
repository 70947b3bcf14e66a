#include "jit/attention/decode/decode_combine.h"

#include <fmt/format.h>

#include "jit/attention/attention_problem.h"
#include "jit/fixed_kernel_family.h"
#include "kernel_src/attention/decode/decode_params.h"

namespace jit::detail {

const KernelFamily& decode_combine_family() {
  static const FixedKernelFamily family(
      "attn_decode_combine", "attention/decode/attn_decode_combine.cu",
      [](const Json& spec) {
        return fmt::format("attn_decode_combine_d{}_{}", spec.at("d").get<int>(), spec.at("dtype").get<std::string>());
      },
      [](const Json& spec) {
        return fmt::format("cujit::decode::attn_decode_combine<{}, cujit::{}>", spec.at("d").get<int>(),
                           spec.at("dtype").get<std::string>());
      });
  return family;
}

Json decode_combine_spec(DType dtype, int head_dim) { return {{"dtype", kernel_dtype_name(dtype)}, {"d", head_dim}}; }

LaunchGeometry decode_combine_geometry(std::int64_t packed_rows) {
  LaunchGeometry g;
  g.grid = {unsigned(packed_rows), 1, 1};
  g.block = {unsigned(cujit::kDecodeCombineThreads), 1, 1};
  return g;
}

}  // namespace jit::detail
