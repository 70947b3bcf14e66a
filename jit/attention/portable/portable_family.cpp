// The portable attention family: kernel_src/attention/portable/.
#include "jit/attention/portable/portable_family.h"

#include <fmt/format.h>


#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/error.h"
#include "jit/kernel_sources.h"
#include "kernel_src/attention/head_dims.h"

namespace jit::detail {
namespace {

struct PortableConfig {
  int bm, bn, stages, warps;
};
void to_json(Json& j, const PortableConfig& c) {
  j = Json{{"bm", c.bm}, {"bn", c.bn}, {"stages", c.stages}, {"warps", c.warps}};
}
void from_json(const Json& j, PortableConfig& c) {
  j.at("bm").get_to(c.bm);
  j.at("bn").get_to(c.bn);
  j.at("stages").get_to(c.stages);
  j.at("warps").get_to(c.warps);
}

// Q's tile and the K/V ring, in elements of `element_bytes` bytes.
constexpr int smem_bytes(int head_dim, int element_bytes, const PortableConfig& c) {
  return (c.bm + 2 * c.stages * c.bn) * head_dim * element_bytes;
}
// q's, k's and v's element size.
int input_bytes(const AttnSpec& s) { return s.fp8_qkv ? 1 : int(element_size(s.dtype)); }
int smem_bytes(const AttnSpec& s, const PortableConfig& c) { return smem_bytes(s.head_dim, input_bytes(s), c); }

// The config used without tuning: the tuned winners on the H100 grid (two
// m-tiles per warp at D=64, one at D=128; cujit-bench with CUJIT_AUTOTUNE=off
// against full, docs/perf-log.md), shrunk where the arch's shared memory is
// too small for them (and, for FP8, where the registers are: see
// typed_default_config).
constexpr PortableConfig default_portable_config(int head_dim, int element_bytes, int max_smem_per_block) {
  const PortableConfig tuned = head_dim <= 64 ? PortableConfig{128, 64, 2, 4} : PortableConfig{128, 64, 2, 8};
  return smem_bytes(head_dim, element_bytes, tuned) <= max_smem_per_block ? tuned : PortableConfig{64, 32, 2, 4};
}
static_assert(default_portable_config(128, 2, 101376).warps == 8, "D=128 keeps the tuned default on sm_89");
static_assert(default_portable_config(128, 2, 48 * 1024).bm == 64, "small shared memory falls back");

// Registers the accumulators alone need per thread (fp32 O and S, and the Q
// fragments, kept in registers only with one m-tile per warp), plus what
// addressing, fragments in flight and the softmax take, measured from the
// ptxas reports. Past 255 ptxas spills. FP8 adds P's conversions and V's
// byte permutes (16 more, measured on sm_89); sm_90 has no FP8 mma.sync of
// its own and ptxas converts the operands to f16 for HMMA (56 more).
int estimated_registers(const AttnSpec& s, const PortableConfig& c, const Target& target) {
  const int m_tiles = c.bm / (16 * c.warps);
  const int q_registers = m_tiles == 1 ? s.head_dim * input_bytes(s) / 8 : 0;
  const int fp8 = !s.fp8_qkv ? 0 : target.cc >= 90 ? 56 : 16;
  return m_tiles * (s.head_dim / 2 + c.bn / 2) + q_registers + 96 + fp8;
}

class PortableAttentionFamily final : public TypedAttentionFamily<PortableConfig> {
 public:
  std::string name() const override { return "attn_fwd_portable"; }

  const KernelSources& sources() const override {
    return embedded_sources("attention/portable/attn_fwd_portable.cu");
  }

  std::vector<PortableConfig> typed_config_space(const AttnSpec&) const override {
    std::vector<PortableConfig> space;
    for (int bm : {64, 128})
      for (int warps : {4, 8})
        for (int bn : {32, 64, 128})
          for (int stages : {2, 3}) space.push_back({bm, bn, stages, warps});
    return space;
  }

  std::optional<std::string> typed_why_pruned(const AttnSpec& s, const PortableConfig& c,
                                              const Target& target) const override {
    // Mirrors the static_asserts at the top of attn_fwd_portable.
    if (s.head_dim % 64 != 0) return fmt::format("head dim {} is not a multiple of 64", s.head_dim);
    if (c.bm % (16 * c.warps) != 0) return fmt::format("BM {} is not a multiple of 16 x {} warps", c.bm, c.warps);
    if (c.bn % 16 != 0) return fmt::format("BN {} is not a multiple of 16", c.bn);
    if (c.stages < 2) return "the K/V ring needs at least 2 stages";
    if (c.bm / (16 * c.warps) > 2) return "more than two 16-row m-tiles per warp";
    if (const int smem = smem_bytes(s, c); smem > target.max_smem_per_block) {
      return fmt::format("needs {} bytes of shared memory, {} allows {}: lower BN or STAGES", smem, target.arch,
                         target.max_smem_per_block);
    }
    if (s.fp8_qkv && target.cc < 89) return fmt::format("FP8 mma.sync needs sm_89 or newer, not {}", target.arch);
    if (s.fp8_qkv && c.bn % 32 != 0) return fmt::format("BN {} is not a multiple of FP8's 32-key k-step", c.bn);
    if (const int regs = estimated_registers(s, c, target); regs > 255) {
      return fmt::format("needs about {} registers per thread (limit 255, it would spill): lower BN or use more warps",
                         regs);
    }
    // Measured: at D = 128 with one m-tile per warp the dense kernel already
    // uses all 255 registers with three stages on sm_90; a ragged tile's
    // bounds (in registers, not the constant bank) tip it into spilling.
    if (s.varlen && s.head_dim == 128 && c.bm / (16 * c.warps) == 1 && c.bn >= 64 && c.stages >= 3 &&
        target.cc >= 90) {
      return "the ragged variant spills at D = 128, one m-tile per warp, BN >= 64 and 3 stages on sm_90: use 2 stages";
    }
    return std::nullopt;
  }

  PortableConfig typed_default_config(const AttnSpec& s, const Target& target) const override {
    const PortableConfig preferred = default_portable_config(s.head_dim, input_bytes(s), target.max_smem_per_block);
    if (!s.fp8_qkv) return preferred;
    // FP8 on sm_90 needs more registers (estimated_registers): the first of
    // these that fits, 64-key blocks first.
    for (const PortableConfig& c : {preferred, PortableConfig{128, 32, 2, 8}, PortableConfig{64, 32, 2, 4}}) {
      if (!typed_why_pruned(s, c, target)) return c;
    }
    return preferred;
  }

  std::string typed_variant_name(const AttnSpec& s, const PortableConfig& c) const override {
    return fmt::format("attn_fwd_portable_d{}_{}{}{}{}_bm{}_bn{}_st{}_w{}", s.head_dim, s.fp8_qkv ? "e4m3_to_" : "",
                       kernel_dtype_name(s.dtype), s.causal ? "_causal" : "", s.varlen ? "_varlen" : "", c.bm, c.bn,
                       c.stages, c.warps);
  }

  std::string typed_name_expression(const AttnSpec& s, const PortableConfig& c) const override {
    return fmt::format("cujit::portable::attn_fwd_portable<{}, {}, {}, {}, {}, cujit::{}, {}, {}, cujit::{}>",
                       s.head_dim, c.bm, c.bn, c.stages, c.warps, kernel_dtype_name(s.dtype),
                       s.causal ? "true" : "false", s.varlen ? "true" : "false",
                       s.fp8_qkv ? "e4m3" : kernel_dtype_name(s.dtype));
  }

  // Dense and ragged batches (jit/attention/varlen/varlen_prepare.h), each
  // also with FP8 inputs.
  std::vector<AttnSpec> spec_variants(const AttnSpec& base) const override {
    return dense_and_ragged(base, /*fp8_inputs=*/true);
  }
  std::vector<int> index_param_offsets(const Json& spec, const Json&) const override {
    return varlen_index_params(spec, 0);
  }
  std::vector<Companion> companions(const Json& spec) const override { return varlen_companions(spec); }
  void bind_kernels(AttnPlan& plan, const Json& spec, const Kernel& main) const override {
    bind_varlen_kernels(plan, spec, main);
  }

  bool supports(const AttnProblem& problem, const Target& target) const override {
    if (problem.fp8_qkv && target.cc < 89) return false;
    return runs_on(target) && !problem.kv_cache() && cujit::kPortableHeadDims.contains(int(problem.head_dim));
  }

  AttnPlan typed_plan(const AttnProblem& problem, const PortableConfig& c, const Target& target) const override {
    AttnPlan plan;
    if (problem.varlen) add_varlen_prepare_step(plan, problem, c.bm, c.bn, varlen_attention_pdl(target));
    AttnStep& step = plan.add_step();
    // Ragged: one CTA per slot of the prepare step's list and head (those
    // past the list's count return at once).
    step.geometry.grid = problem.varlen ? Dim3{unsigned(varlen_tile_slots(problem, c.bm) * problem.heads_q), 1, 1}
                                        : Dim3{unsigned((problem.seq_q + c.bm - 1) / c.bm), unsigned(problem.heads_q),
                                               unsigned(problem.batch)};
    step.geometry.block = {unsigned(32 * c.warps), 1, 1};
    step.geometry.smem_bytes = unsigned(smem_bytes(spec_of(problem), c));
    step.geometry.programmatic_dependent_launch = problem.varlen && varlen_attention_pdl(target);
    step.params_bytes = sizeof(cujit::AttnParams);
    step.params_align = alignof(cujit::AttnParams);
    return plan;
  }

  void launch(const AttnPlan& plan, const AttnProblem& problem, const AttnTensors& t, void* workspace,
              Stream stream) const override {
    cujit::AttnParams p = make_attn_params(problem, t.q, t.k, t.v, t.out, t.lse);
    if (problem.fp8_qkv) set_fp8_descales(p, t);
    if (problem.varlen) {
      if (!t.varlen_tiles_ready) launch_varlen_prepare(plan.steps[0], problem, t, workspace, stream);
      const VarlenTileList list = varlen_tile_list(workspace);
      p.varlen_tiles = list.tiles;
      p.varlen_tile_count = list.count;
    }
    const AttnStep& step = plan.steps[std::size_t(plan.step_count - 1)];
    step.kernel->launch(step.geometry, p, stream);
  }

  static bool runs_on(const Target& target) { return target.cc >= 80; }
};

}  // namespace

const AttentionFamily& portable_attention_family() {
  static const PortableAttentionFamily family;
  return family;
}

FamilyRegistration portable_registration() {
  return {&portable_attention_family(), "portable", cujit::kPortableHeadDims,
          &PortableAttentionFamily::runs_on, nullptr};
}

}  // namespace jit::detail
