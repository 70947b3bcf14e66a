#include "jit/attention/varlen/varlen_prepare.h"

#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstddef>

#include "jit/attention/first_bad_index.h"
#include "jit/attention/l2_share.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/fixed_kernel_family.h"
#include "jit/knobs.h"
#include "jit/log.h"

namespace jit::detail {
namespace {

// The workspace: the tile count, padded to the tiles' alignment, then the tiles.
constexpr std::size_t kTilesOffset = alignof(cujit::VarlenTile);

struct PrepareStepData {
  int bm, bn, max_tiles;
};

constexpr unsigned kPrepareThreads = 1024;  // varlen_prepare.cu's kThreads



}  // namespace

int varlen_group_key_rows(const AttnProblem& problem) {
  return int(
      std::clamp<std::int64_t>(kTileGroupL2Bytes / std::max<std::int64_t>(problem.kv_bytes_per_key(), 1), 1, INT_MAX));
}

const KernelFamily& varlen_prepare_family() {
  static const FixedKernelFamily family(
      "varlen_prepare", "attention/varlen/varlen_prepare.cu", [](const Json&) { return std::string("varlen_prepare"); },
      [](const Json&) { return std::string("cujit::varlen::varlen_prepare"); },
      // The prefix sums: a branch on a sequence's length is like one on a
      // shape. They are all it reads, and the tile list it sorts in shared
      // memory is made of them.
      {int(offsetof(cujit::VarlenPrepareParams, cu_seqlens_q)), int(offsetof(cujit::VarlenPrepareParams, cu_seqlens_k))},
      /*index_only=*/true);
  return family;
}

std::vector<AttnSpec> dense_and_ragged(const AttnSpec& base, bool fp8_inputs) {
  AttnSpec varlen = base;
  varlen.varlen = true;
  std::vector<AttnSpec> specs = {base, varlen};
  if (fp8_inputs) {
    for (AttnSpec s : {base, varlen}) {
      s.fp8_qkv = true;
      specs.push_back(s);
    }
  }
  return specs;
}

std::vector<AttentionFamily::Companion> varlen_companions(const Json& spec) {
  if (!spec.value("varlen", false)) return {};
  return {{&varlen_prepare_family(), Json::object(), Json::object()}};
}

std::vector<int> varlen_index_params(const Json& spec, int attn_offset) {
  if (!spec.value("varlen", false)) return {};
  return {attn_offset + int(offsetof(cujit::AttnParams, varlen_tiles)),
          attn_offset + int(offsetof(cujit::AttnParams, varlen_tile_count))};
}

std::int64_t varlen_tile_slots(const AttnProblem& problem, int bm) {
  return cujit::varlen_max_tiles(problem.total_q, problem.batch, bm);
}

void add_varlen_prepare_step(AttnPlan& plan, const AttnProblem& problem, int bm, int bn, bool pdl) {
  const std::int64_t slots = varlen_tile_slots(problem, bm);
  if (slots * problem.heads_q >= (std::int64_t{1} << 31)) {
    throw Error(ErrorCode::Unsupported, fmt::format("{} tiles of {} rows times {} heads exceed the kernels' 32-bit "
                                                    "tile index: split the batch",
                                                    slots, bm, problem.heads_q));
  }
  AttnStep& step = plan.add_step();
  step.geometry.grid = {1, 1, 1};
  step.geometry.block = {kPrepareThreads, 1, 1};
  step.geometry.programmatic_dependent_launch = pdl;
  step.params_bytes = sizeof(cujit::VarlenPrepareParams);
  step.params_align = alignof(cujit::VarlenPrepareParams);
  step.data.set(PrepareStepData{bm, bn, int(slots)});
  plan.workspace_bytes = kTilesOffset + std::size_t(slots) * sizeof(cujit::VarlenTile);
}

bool varlen_attention_pdl(const Target& target) { return target.cc >= 90 && knobs().pdl; }

void bind_varlen_kernels(AttnPlan& plan, const Json& spec, const Kernel& main) {
  const bool varlen = spec.value("varlen", false);
  for (int i = 0; i < plan.step_count; ++i) plan.steps[std::size_t(i)].kernel = &main;
  if (varlen) plan.steps[0].kernel = &get_kernel(varlen_prepare_family(), Json::object(), Json::object());
}

VarlenTileList varlen_tile_list(void* workspace) {
  char* base = static_cast<char*>(workspace);
  return {reinterpret_cast<const cujit::VarlenTile*>(base + kTilesOffset), reinterpret_cast<const int*>(base)};
}

void launch_varlen_prepare(const AttnStep& step, const AttnProblem& problem, const AttnTensors& t, void* workspace,
                           Stream stream, int* first_bad) {
  if (workspace == nullptr) throw Error(ErrorCode::Internal, "a ragged plan was launched without its workspace");
  const PrepareStepData d = step.data.get<PrepareStepData>();
  char* base = static_cast<char*>(workspace);
  cujit::VarlenPrepareParams p{};
  p.cu_seqlens_q = t.cu_seqlens_q;
  p.cu_seqlens_k = t.cu_seqlens_k;
  p.batch = int(problem.batch);
  p.total_q = int(problem.total_q);
  p.total_k = int(problem.total_k);
  p.max_seq_q = int(problem.seq_q);
  p.max_seq_k = int(problem.seq_k);
  p.bm = d.bm;
  p.bn = d.bn;
  p.causal = problem.causal;
  p.bottom_right = problem.align_bottom_right;
  p.group_key_rows = varlen_group_key_rows(problem);
  p.max_tiles = d.max_tiles;
  p.tiles = reinterpret_cast<cujit::VarlenTile*>(base + kTilesOffset);
  p.tile_count = reinterpret_cast<int*>(base);
  p.first_bad = first_bad;
  step.kernel->launch(step.geometry, p, stream);
}

void check_varlen_contents(const AttnProblem& problem, const AttnTensors& tensors, Stream stream) {
  if (!can_check_on(stream, "cu_seqlens")) return;
  // The prepare step with the smallest tiles, into a workspace of its own.
  constexpr int kCheckRows = 64;
  AttnPlan plan;
  add_varlen_prepare_step(plan, problem, kCheckRows, kCheckRows, false);
  plan.steps[0].kernel = &get_kernel(varlen_prepare_family(), Json::object(), Json::object());
  DeviceBuffer workspace(plan.workspace_bytes);
  const FirstBadIndex first_bad;
  launch_varlen_prepare(plan.steps[0], problem, tensors, workspace.data(), stream, first_bad.device());
  const std::optional<std::int32_t> bad = first_bad.after(stream);
  if (!bad) return;
  const std::int32_t b = *bad;
  const std::int32_t q0 = read_device_int32(tensors.cu_seqlens_q + b);
  const std::int32_t q1 = read_device_int32(tensors.cu_seqlens_q + b + 1);
  const std::int32_t k0 = read_device_int32(tensors.cu_seqlens_k + b);
  const std::int32_t k1 = read_device_int32(tensors.cu_seqlens_k + b + 1);
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("CUJIT_CHECK: sequence {} of the ragged batch is wrong: cu_seqlens_q[{}..{}] = {}, {} and "
                          "cu_seqlens_k[{}..{}] = {}, {}; prefix sums start at 0, never decrease, end within the "
                          "packed rows (q {}, k {}), and no step is longer than max_seqlen_q ({}) / max_seqlen_k ({})",
                          b, b, b + 1, q0, q1, b, b + 1, k0, k1, problem.total_q, problem.total_k, problem.seq_q,
                          problem.seq_k));
}

}  // namespace jit::detail
