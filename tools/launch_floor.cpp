// The empty kernel family and its timing (launch_floor.h).
#include "tools/launch_floor.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

namespace launch_floor {
namespace {

constexpr const char* kEmptyKernelSource = R"(
template <int BYTES, int ALIGN>
struct alignas(ALIGN) BenchParams { unsigned char bytes[BYTES]; };

template <int BYTES, int ALIGN>
__global__ void bench_empty(const __grid_constant__ BenchParams<BYTES, ALIGN> p) {}
)";

// Spec: {"bytes": N, "align": A}; one config.
class EmptyKernelFamily final : public jit::KernelFamily {
 public:
  std::string name() const override { return "bench_empty"; }
  const jit::KernelSources& sources() const override {
    static const jit::KernelSources sources{"bench_empty.cu", {{"bench_empty.cu", kEmptyKernelSource}}};
    return sources;
  }
  std::vector<jit::Json> config_space(const jit::Json&) const override { return {jit::Json::object()}; }
  std::optional<std::string> why_pruned(const jit::Json&, const jit::Json&, const jit::Target&) const override {
    return std::nullopt;
  }
  jit::Json default_config(const jit::Json&, const jit::Target&) const override { return jit::Json::object(); }
  std::string variant_name(const jit::Json& spec, const jit::Json&) const override {
    return fmt::format("bench_empty_{}b_align{}", spec.at("bytes").get<int>(), spec.at("align").get<int>());
  }
  std::string name_expression(const jit::Json& spec, const jit::Json&) const override {
    return fmt::format("bench_empty<{}, {}>", spec.at("bytes").get<int>(), spec.at("align").get<int>());
  }
};

}  // namespace

const jit::Kernel& empty_kernel(std::size_t params_bytes, std::size_t params_align) {
  static const EmptyKernelFamily family;
  const jit::Json spec = {{"bytes", params_bytes}, {"align", params_align}};
  return jit::get_kernel(family, spec, family.default_config(spec, jit::current_target()));
}

jit::TimingOptions latency_timing(bool scrub_l2) {
  jit::TimingOptions timing;
  timing.warmup = 5;
  timing.min_reps = 50;
  timing.max_reps = 200;
  timing.target_ms = 20;
  timing.flush_l2 = scrub_l2;
  return timing;
}

double empty_kernel_us(std::size_t params_bytes, std::size_t params_align, const jit::LaunchGeometry& geometry,
                       const jit::TimingOptions& timing, jit::Stream stream) {
  const jit::Kernel& kernel = empty_kernel(params_bytes, params_align);
  // Zero bytes: Kernel::launch checks that the kernel's parameter has this many.
  const std::vector<unsigned char> params(params_bytes, 0);
  return jit::time_on_stream([&] { kernel.launch(geometry, params.data(), params.size(), stream); }, stream, timing)
      .median_us;
}

jit::LaunchGeometry one_cta() {
  jit::LaunchGeometry geometry;
  geometry.grid = {1, 1, 1};
  geometry.block = {128, 1, 1};
  return geometry;
}

}  // namespace launch_floor
