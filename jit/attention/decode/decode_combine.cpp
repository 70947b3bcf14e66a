#include "jit/attention/decode/decode_combine.h"

#include <fmt/format.h>

#include "jit/attention/attention_family.h"

namespace jit::detail {
namespace {

constexpr int kCombineWarps = 4;  // attn_decode_combine.cu's kCombineWarps

class DecodeCombineFamily final : public KernelFamily {
 public:
  std::string name() const override { return "attn_decode_combine"; }
  const KernelSources& sources() const override {
    return attention_sources("attention/decode/attn_decode_combine.cu");
  }
  std::vector<Json> config_space(const Json&) const override { return {Json::object()}; }
  std::optional<std::string> why_pruned(const Json&, const Json&, const Target&) const override {
    return std::nullopt;
  }
  Json default_config(const Json&, const Target&) const override { return Json::object(); }
  std::string variant_name(const Json& spec, const Json&) const override {
    return fmt::format("attn_decode_combine_d{}_{}", spec.at("d").get<int>(), spec.at("dtype").get<std::string>());
  }
  std::string name_expression(const Json& spec, const Json&) const override {
    return fmt::format("cujit::decode::attn_decode_combine<{}, cujit::{}>", spec.at("d").get<int>(),
                       spec.at("dtype").get<std::string>());
  }
};

}  // namespace

const KernelFamily& decode_combine_family() {
  static const DecodeCombineFamily family;
  return family;
}

Json decode_combine_spec(DType dtype, int head_dim) { return {{"dtype", kernel_dtype_name(dtype)}, {"d", head_dim}}; }

LaunchGeometry decode_combine_geometry(std::int64_t packed_rows) {
  LaunchGeometry g;
  g.grid = {unsigned((packed_rows + kCombineWarps - 1) / kCombineWarps), 1, 1};
  g.block = {unsigned(32 * kCombineWarps), 1, 1};
  return g;
}

}  // namespace jit::detail
