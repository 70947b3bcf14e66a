// RowSoftmax: y[r, :] = softmax(x[r, :]) over float32 rows, as a cujit kernel
// family. Config: threads per row block and elements per thread per step.
#pragma once
#include <cstdint>

#include "jit/cujit.h"

namespace example {

// The kernel's only argument; mirrored in the kernel source.
struct RowSoftmaxParams {
  const float* x;
  float* y;
  std::int64_t rows;
  std::int64_t cols;
};

class RowSoftmaxFamily final : public jit::KernelFamily {
 public:
  std::string name() const override { return "row_softmax"; }
  const jit::KernelSources& sources() const override;
  std::vector<jit::Json> config_space(const jit::Json& spec) const override;
  std::optional<std::string> why_pruned(const jit::Json& spec, const jit::Json& config,
                                        const jit::Target& target) const override;
  jit::Json default_config(const jit::Json& spec, const jit::Target& target) const override;
  std::string variant_name(const jit::Json& spec, const jit::Json& config) const override;
  std::string name_expression(const jit::Json& spec, const jit::Json& config) const override;

  jit::LaunchGeometry geometry(std::int64_t rows, const jit::Json& config) const;
};

// Tunes (first call per column bucket) and runs y = softmax(x) row-wise.
// x and y are device pointers to rows x cols float32, row-major.
void row_softmax(const float* x, float* y, std::int64_t rows, std::int64_t cols, jit::Stream stream = nullptr);

}  // namespace example
