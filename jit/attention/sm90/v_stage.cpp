#include "jit/attention/sm90/v_stage.h"

#include <fmt/format.h>

#include <algorithm>

#include "jit/error.h"
#include "jit/fixed_kernel_family.h"
#include "kernel_src/attention/sm90/v_stage_params.h"

namespace jit::detail {
namespace {

// The staging of V for key blocks of `block_n`: blocks per (batch, KV head),
// 128-byte rows in all, and bytes.
struct VStageGeometry {
  std::int64_t blocks = 0, rows = 0;
  std::size_t bytes = 0;
};

VStageGeometry v_stage_geometry(const AttnProblem& problem, int block_n) {
  VStageGeometry g;
  g.blocks = (problem.seq_k + block_n - 1) / block_n;
  g.rows = problem.batch * problem.heads_kv * g.blocks * cujit::sm90::transposed_v_chunks(block_n) * problem.head_dim;
  g.bytes = std::size_t(g.rows) * cujit::sm90::kRowBytes;
  return g;
}

// Fixed by the plan, read at each launch.
struct VStageStepData {
  int block_n;
  int seq_k, heads_kv;
  VStageGeometry geometry;
};

}  // namespace

const KernelFamily& v_stage_family() {
  static const FixedKernelFamily family(
      "attn_v_stage", "attention/sm90/v_stage.cu",
      [](const Json& spec) { return fmt::format("attn_v_stage_d{}", spec.at("d").get<int>()); },
      [](const Json& spec) { return fmt::format("cujit::sm90::attn_v_stage<{}>", spec.at("d").get<int>()); });
  return family;
}

Json v_stage_spec(int head_dim) { return {{"d", head_dim}}; }

void add_v_stage_step(AttnPlan& plan, const AttnProblem& problem, int block_n) {
  const VStageGeometry g = v_stage_geometry(problem, block_n);
  if (g.rows >= (std::int64_t{1} << 31) || problem.batch > 65535 || problem.heads_kv > 65535) {
    throw Error(ErrorCode::Unsupported,
                fmt::format("V staged for {} batches of {} KV heads and {} keys passes the staging pass's limits "
                            "(2^31 rows of 128 bytes, 65535 batches and KV heads)",
                            problem.batch, problem.heads_kv, problem.seq_k));
  }
  AttnStep& step = plan.add_step();
  step.geometry.grid = {unsigned(g.blocks), unsigned(problem.heads_kv), unsigned(problem.batch)};
  step.geometry.block = {unsigned(cujit::kVStageThreads), 1, 1};
  step.geometry.smem_bytes = unsigned(block_n * (problem.head_dim + cujit::kVStageRowPad));
  step.params_bytes = sizeof(cujit::VStageParams);
  step.params_align = alignof(cujit::VStageParams);
  step.data.set(VStageStepData{block_n, int(problem.seq_k), int(problem.heads_kv), g});
  plan.workspace_bytes = std::max(plan.workspace_bytes, g.bytes);
}

StagedV launch_v_stage(const AttnStep& step, const TensorView& v, void* workspace, Stream stream) {
  if (workspace == nullptr) throw Error(ErrorCode::Internal, "a staged-V plan was launched without its workspace");
  const VStageStepData d = step.data.get<VStageStepData>();
  cujit::VStageParams p{};
  p.v = static_cast<const unsigned char*>(v.data);
  for (int i = 0; i < 3; ++i) p.v_stride[i] = v.strides[std::size_t(i)];
  p.staged = static_cast<unsigned char*>(workspace);
  p.seq_k = d.seq_k;
  p.heads_kv = d.heads_kv;
  p.block_n = d.block_n;
  p.blocks = int(d.geometry.blocks);
  step.kernel->launch(step.geometry, p, stream);
  constexpr std::int64_t kRow = cujit::sm90::kRowBytes;
  const std::int64_t rows = d.geometry.rows;
  return {TensorView{workspace, DType::e4m3, {1, 1, rows, kRow}, {rows * kRow, rows * kRow, kRow, 1}},
          int(d.geometry.blocks)};
}

}  // namespace jit::detail
