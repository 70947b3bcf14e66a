// The Hopper attention family: kernel_src/attention/sm90/.
#include "jit/attention/sm90/sm90_family.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>

#include "jit/attention/kv_validation.h"
#include "jit/attention/sm90/tile_order.h"
#include "jit/attention/sm90/v_stage.h"
#include "jit/attention/varlen/varlen_prepare.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/kernel_sources.h"
#include "jit/knobs.h"
#include "kernel_src/attention/head_dims.h"
#include "kernel_src/attention/sm90/attn_params_sm90.h"
#include "kernel_src/attention/sm90/smem_layout.h"

namespace jit::detail {
namespace {

// vt_staged (FP8, dense): V transposed by a staging pass ahead of the
// kernel (v_stage.cu) rather than by the kernel's producer warpgroup. Written
// to JSON only when set, so the configs that predate it keep their records.
struct Sm90Config {
  int bm, bn, stages;
  bool vt_staged = false;
};
void to_json(Json& j, const Sm90Config& c) {
  j = Json{{"bm", c.bm}, {"bn", c.bn}, {"stages", c.stages}};
  if (c.vt_staged) j["vt_staged"] = true;
}
void from_json(const Json& j, Sm90Config& c) {
  j.at("bm").get_to(c.bm);
  j.at("bn").get_to(c.bn);
  j.at("stages").get_to(c.stages);
  c.vt_staged = j.value("vt_staged", false);
}

constexpr cujit::sm90::SmemLayout layout_of(int head_dim, const Sm90Config& c) {
  return cujit::sm90::SmemLayout(head_dim, c.bm, c.bn, c.stages);
}
cujit::sm90::SmemLayout layout_of(const AttnSpec& s, const Sm90Config& c) {
  return s.fp8_qkv ? cujit::sm90::SmemLayout(s.head_dim, c.bm, c.bn, c.stages, 1, int(element_size(s.dtype)))
                   : layout_of(s.head_dim, c);
}

// FP8 inputs: V is transposed into [D] rows of 128-byte chunks of keys,
// beside Q, K and V in the ring and O in 16 bits. D = 128: BN 128, 192 or
// 224 (the softmax's fixed costs per key block, the O rescale among them,
// over 1.5x or 1.75x the keys; two stages only, a transposed chunk partly
// used, and at 224 one Q buffer), or with three consumer warpgroups (152
// registers each) BN 64 or 96. D = 256: BN 64 (two stages, one Q
// buffer: O alone is 64 KiB) or 128 (O not staged: stored from registers).
// D = 64 (64-byte rows)
// has no kernel here: the portable family serves it.
// Empty where no FP8 kernel exists.
std::span<const int> fp8_block_ns(std::int64_t head_dim) {
  static constexpr int kD128[] = {64, 96, 128, 192, 224};
  static constexpr int kD256[] = {64, 128};
  if (head_dim == 128) return kD128;
  if (head_dim == 256) return kD256;
  return {};
}

// An estimate of the registers a consumer thread needs (it may use
// smem_layout.h's consumer_registers): the O and S accumulators (fp32), P (S
// converted to 16 bits, BN / 4, or to e4m3, BN / 8), and addressing and
// softmax state (fewer with e4m3 inputs), calibrated on the ptxas reports of
// the shipped space.
constexpr int estimated_registers(int head_dim, const Sm90Config& c, bool fp8 = false) {
  return head_dim / 2 + c.bn / 2 + c.bn / (fp8 ? 8 : 4) + (fp8 ? 28 : 32);
}

// The config used without tuning: the tuned winners of most grid shapes
// (docs/perf-log.md). At D = 64, three consumer warpgroups pay off only
// without the causal mask's short tiles, and there a 4-deep K/V ring is 8%
// faster at S = 512 (a tile's first key blocks are in shared memory when it
// starts) and as fast elsewhere.
constexpr Sm90Config default_sm90_config(int head_dim, bool causal) {
  if (head_dim <= 64) return causal ? Sm90Config{128, 128, 2} : Sm90Config{192, 128, 4};
  return head_dim <= 128 ? Sm90Config{128, 128, 2} : Sm90Config{128, 80, 2};
}
static_assert(layout_of(256, default_sm90_config(256, false)).bytes <= cujit::sm90::kMaxSmemOptIn);
static_assert(estimated_registers(256, default_sm90_config(256, false)) <= cujit::sm90::consumer_registers(128));
static_assert(estimated_registers(64, default_sm90_config(64, false)) <= cujit::sm90::consumer_registers(192));
static_assert(layout_of(64, default_sm90_config(64, false)).bytes <= cujit::sm90::kMaxSmemOptIn);
static_assert(layout_of(64, default_sm90_config(64, false)).q_buffers == 2);

// A chunk over pages whose rows the kernel gathers (PAGE = kGatheredRows).
constexpr bool gathers_rows(const AttnSpec& s) { return s.paged && s.kv_cache && s.page_size == 0; }

// What a launch's parameters need beyond the tensors: the scheduler's tile
// counts, order and divisors, computed once per plan.
struct Sm90StepData {
  int block_n;
  int m_blocks;     // ceil(seq_q / BM)
  int total_tiles;  // m_blocks * heads_q * batch
  bool vt_staged;   // V staged transposed by the plan's first step
  // By a group's tiles (group_heads * m_blocks, tile_order.h), by its pairs
  // (the last group's may be fewer), by heads_q.
  cujit::FastDivisor tile_divisor, group_divisor, last_group_divisor, head_divisor;
};

// The (batch, head) pairs of the last of the groups of group_heads.
constexpr int last_group_heads(int pairs, int group_heads) {
  return pairs - (pairs > 0 ? (pairs - 1) / group_heads * group_heads : 0);
}
static_assert(last_group_heads(512, 192) == 128 && last_group_heads(512, 1) == 1 && last_group_heads(512, 512) == 512 &&
              last_group_heads(384, 192) == 192);

// A 4-D TMA map over (D, S, H, B) of a [B, H, S, D] view, boxes of (128
// bytes, rows): 64 elements of 16 bits, 128 of e4m3.
// A dimension of extent 1 may have any stride in the view; TMA wants a
// 16-byte multiple, so it gets the dense one (it is never stepped).
cujit::TmaDescriptor tensor_map(const TensorView& t, int box_rows) {
  const std::int64_t b = t.shape[0], h = t.shape[1], s = t.shape[2], d = t.shape[3];
  const cuuint64_t element = element_size(t.dtype);
  cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(s), cuuint64_t(h), cuuint64_t(b)};
  cuuint64_t strides[3];
  const std::int64_t extent[3] = {s, h, b};
  cuuint64_t dense = cuuint64_t(d) * element;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t stride = t.strides[2 - i];
    strides[i] = extent[i] > 1 ? cuuint64_t(stride) * element : dense;
    dense = strides[i] * cuuint64_t(extent[i]);
  }
  cuuint32_t box[4] = {cuuint32_t(cujit::sm90::chunk_columns(int(element))), cuuint32_t(box_rows), 1, 1};
  cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = t.dtype == DType::f16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  CUtensorMap map;
  CUJIT_CU_CHECK(driver().cuTensorMapEncodeTiled(
      &map, type, 4, t.data,
      dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  cujit::TmaDescriptor out;
  static_assert(sizeof(out) == sizeof(map), "TmaDescriptor mirrors CUtensorMap");
  std::memcpy(&out, &map, sizeof(map));
  return out;
}

// tensor_map through a small per-thread cache: the last maps this thread
// encoded, reused when the same view (address, dtype, shape, strides) comes
// with the same box, so a repeated call encodes nothing on its hot path. A
// map holds nothing but those fields, so reuse is exact whatever the memory
// at that address has become since.
cujit::TmaDescriptor cached_tensor_map(const TensorView& t, int box_rows) {
  struct Entry {
    TensorView view{};
    int box_rows = 0;
    cujit::TmaDescriptor map{};
  };
  constexpr std::size_t kEntries = 8;  // q, k, v, o of two alternating problems
  thread_local std::array<Entry, kEntries> entries;
  thread_local std::size_t next = 0;
  for (const Entry& e : entries) {
    if (e.box_rows == box_rows && e.view.data == t.data && e.view.dtype == t.dtype && e.view.shape == t.shape &&
        e.view.strides == t.strides) {
      return e.map;
    }
  }
  Entry& e = entries[next++ % kEntries];
  e.map = tensor_map(t, box_rows);
  e.view = t;
  e.box_rows = box_rows;
  return e.map;
}

class Sm90AttentionFamily final : public TypedAttentionFamily<Sm90Config> {
 public:
  std::string name() const override { return "attn_fwd_sm90"; }

  const KernelSources& sources() const override { return embedded_sources("attention/sm90/attn_fwd_sm90.cu"); }

  std::vector<Sm90Config> typed_config_space(const AttnSpec& s) const override {
    std::vector<Sm90Config> space;
    if (s.fp8_qkv) {
      // Dense batches also with V staged: it costs a pass over V and its
      // size in workspace, and spares the kernel its in-kernel transpose.
      for (bool vt_staged : {false, true}) {
        if (vt_staged && s.varlen) continue;
        for (int bm : {128, 192})
          for (int bn : fp8_block_ns(s.head_dim))
            for (int stages : {2, 3, 4}) space.push_back(Sm90Config{bm, bn, stages, vt_staged});
      }
      return space;
    }
    for (int bm : {128, 192})
      for (int bn : {64, 80, 96, 128, 176})
        for (int stages : {2, 3, 4}) space.push_back(Sm90Config{bm, bn, stages});
    // One consumer warpgroup, two CTAs per SM: one CTA's tile boundaries run
    // under the other's main loop, at twice the K/V traffic; it wins on the
    // smallest problems (docs/perf-log.md v8). Half an SM's shared memory
    // each leaves few key-block sizes worth timing.
    for (int bn : {64, 128})
      for (int stages : {2, 3, 4}) space.push_back(Sm90Config{64, bn, stages});
    return space;
  }

  std::optional<std::string> typed_why_pruned(const AttnSpec& s, const Sm90Config& c,
                                              const Target& target) const override {
    if (!runs_on(target)) return fmt::format("wgmma and TMA need sm_90a, the target is {}", target.arch);
    // Mirrors the static_asserts at the top of attn_fwd_sm90.
    if (!cujit::kSm90HeadDims.contains(s.head_dim)) {
      return fmt::format("head dim {} is not {}", s.head_dim, head_dims_text(cujit::kSm90HeadDims, " or "));
    }
    if (c.bm != 64 && c.bm != 128 && c.bm != 192) return fmt::format("BM {} is not 1 to 3 warpgroups of 64 rows", c.bm);
    if (c.bn % 16 != 0 || c.bn > 256) return fmt::format("BN {} is not a multiple of 16 up to 256", c.bn);
    if (c.stages < 2) return "the K/V ring needs at least 2 stages";
    if (c.vt_staged && (!s.fp8_qkv || s.varlen)) return "V is staged transposed only for dense FP8 inputs";
    if (c.vt_staged && !knobs().fp8_stage_v) return "CUJIT_FP8_STAGE_V=0 keeps V's transpose in the kernel";
    if (s.kv_cache && (s.fp8_qkv || s.fp8_kv || s.varlen)) return "a chunk over a KV cache: 16-bit q and cache";
    if ((s.paged && !s.kv_cache) || (s.page_size != 0 && !s.paged)) {
      return "pages are a KV cache's, and a page size a paged spec's";
    }
    if (s.paged && s.page_size != 0 && !sm90_loads_pages_by_tma(s.page_size)) {
      return fmt::format("pages of {} keys: the sm90 family loads pages of a power of two of at least {} by TMA "
                         "(and gathers the rows of others)",
                         s.page_size, kSm90TmaPageRows);
    }
    // Gathered rows (kv_loader.cuh): a producer warp's lane a row.
    if (gathers_rows(s) && c.bn > 128) {
      return fmt::format("BN {}: gathered pages take blocks of at most 128 keys, 32 rows a producer warp", c.bn);
    }
    if (s.paged && s.page_size != 0 && c.bn % s.page_size != 0 && s.page_size % c.bn != 0) {
      return fmt::format("BN {} and pages of {} keys: a block is whole pages or a page whole blocks", c.bn,
                         s.page_size);
    }
    // Three consumer warpgroups take BN 64 or 96 at D = 128, and the staging
    // pass writes V in 128-key chunks: 2x or 1.33x the V bytes such a block
    // reads. Never the tuner's pick (docs/perf-log.md fp8 v6, v7: the
    // in-kernel transposer at BM = 192, or staged BM = 128); pruned so that
    // a first call does not time six more configs.
    if (c.vt_staged && c.bm == 192) return "V is staged transposed only for two consumer warpgroups (BM = 128)";
    if (const std::span<const int> bns = fp8_block_ns(s.head_dim);
        s.fp8_qkv && (std::ranges::find(bns, c.bn) == bns.end() || c.bm == 64)) {
      return fmt::format("FP8 inputs take head dim 128 (BN 64 to 224) or 256 (BN 64 or 128) and two or three "
                         "consumer warpgroups");
    }
    // Two warpgroups' 232 registers hold BN = 128 and more: a smaller block
    // only pays the softmax's fixed costs over fewer keys.
    if (s.fp8_qkv && s.head_dim == 128 && c.bm == 128 && c.bn < 128) {
      return "FP8 at head dim 128 takes BN < 128 only with three consumer warpgroups";
    }
    // At D = 256 only BN 64 could take a third stage (with O unstaged):
    // measured no faster than two (docs/perf-log.md fp8 v4), and its ragged
    // tiles spill.
    if (s.fp8_qkv && s.head_dim == 256 && c.stages > 2) return "FP8 at head dim 256 takes two K/V stages";
    // ptxas reports: a ragged tile's bounds (in registers, not the constant
    // bank) beside the scores spill: causal at BN = 192 (48 bytes), at BN =
    // 224 either way (12 bytes without the mask).
    if (s.fp8_qkv && s.varlen && c.bn > (s.causal ? 128 : 192)) {
      return fmt::format("FP8 ragged {}tiles spill at BN > {}", s.causal ? "causal " : "", s.causal ? 128 : 192);
    }
    if (const int smem = layout_of(s, c).bytes; smem > target.max_smem_per_block) {
      return fmt::format("needs {} bytes of shared memory, {} allows {}: lower BN or STAGES", smem, target.arch,
                         target.max_smem_per_block);
    } else if (const int budget = cujit::sm90::smem_budget(c.bm); smem > budget) {
      return fmt::format("needs {} bytes of shared memory, {} CTAs per SM leave {} each: lower BN or STAGES", smem,
                         cujit::sm90::ctas_per_sm(c.bm), budget);
    }
    if (const int regs = estimated_registers(s.head_dim, c, s.fp8_qkv);
        regs > cujit::sm90::consumer_registers(c.bm, s.fp8_qkv, s.head_dim, gathers_rows(s))) {
      return fmt::format("needs about {} registers per consumer thread, {} warpgroups allow {}: lower BN", regs,
                         c.bm / 64, cujit::sm90::consumer_registers(c.bm, s.fp8_qkv, s.head_dim, gathers_rows(s)));
    }
    return std::nullopt;
  }

  Sm90Config typed_default_config(const AttnSpec& s, const Target& target) const override {
    if (s.fp8_qkv) return Sm90Config{128, fp8_block_ns(s.head_dim).front(), 2};
    const Sm90Config c = default_sm90_config(s.head_dim, s.causal);
    // Pages a block of the default's BN neither fills nor lies in (BN 80 at
    // D = 256, pages of 64 keys or more), or gathered rows of a block over
    // 128 keys: 64-key blocks.
    if (s.paged && typed_why_pruned(s, c, target)) return Sm90Config{c.bm, 64, c.stages};
    return c;
  }

  std::string typed_variant_name(const AttnSpec& s, const Sm90Config& c) const override {
    return fmt::format("attn_fwd_sm90_d{}_{}{}{}{}{}_bm{}_bn{}_st{}{}", s.head_dim, s.fp8_qkv ? "e4m3_to_" : "",
                       kernel_dtype_name(s.dtype), s.causal ? "_causal" : "", s.varlen ? "_varlen" : "",
                       !s.kv_cache ? ""
                       : gathers_rows(s) ? std::string("_paged")
                       : s.paged         ? fmt::format("_paged{}", s.page_size)
                                         : std::string("_cache"),
                       c.bm, c.bn, c.stages, c.vt_staged ? "_vstaged" : "");
  }

  std::string typed_name_expression(const AttnSpec& s, const Sm90Config& c) const override {
    // KV_CACHE and PAGE only where set: the other variants keep their names.
    return fmt::format("cujit::sm90::attn_fwd_sm90<{}, {}, {}, {}, cujit::{}, {}, {}, cujit::{}, {}{}>", s.head_dim,
                       c.bm, c.bn, c.stages, kernel_dtype_name(s.dtype), s.causal ? "true" : "false",
                       s.varlen ? "true" : "false", s.fp8_qkv ? "e4m3" : kernel_dtype_name(s.dtype),
                       c.vt_staged ? "true" : "false",
                       !s.kv_cache ? std::string()
                                   : fmt::format(", true, {}", gathers_rows(s) ? cujit::kGatheredRows : s.page_size));
  }

  // Dense and ragged batches (jit/attention/varlen/varlen_prepare.h), each
  // also with FP8 inputs at D = 128 or 256.
  std::vector<AttnSpec> spec_variants(const AttnSpec& base) const override {
    std::vector<AttnSpec> specs = dense_and_ragged(base, !fp8_block_ns(base.head_dim).empty());
    // And a chunk over a KV cache, contiguous and in pages of the common
    // sizes (16: gathered rows).
    AttnSpec cache = base;
    cache.kv_cache = true;
    specs.push_back(cache);
    cache.paged = true;
    specs.push_back(cache);
    return specs;
  }
  std::vector<int> index_param_offsets(const Json& spec, const Json&) const override {
    std::vector<int> offsets = varlen_index_params(spec, int(offsetof(cujit::Sm90AttnParams, attn)));
    // A cache's lengths and page ids: a branch on them is like a branch on a shape.
    if (spec.get<AttnSpec>().kv_cache) {
      offsets.push_back(int(offsetof(cujit::Sm90AttnParams, seq_lens)));
      offsets.push_back(int(offsetof(cujit::Sm90AttnParams, block_table)));
    }
    return offsets;
  }
  // The TMA descriptors make the struct 64-byte aligned: cujit-sass needs it.
  int params_alignment(const Json&, const Json&) const override { return int(alignof(cujit::Sm90AttnParams)); }
  std::vector<Companion> companions(const Json& spec) const override {
    std::vector<Companion> out = varlen_companions(spec);
    if (const AttnSpec s = spec.get<AttnSpec>(); s.fp8_qkv && !s.varlen) {
      out.push_back({&v_stage_family(), v_stage_spec(int(s.head_dim)), Json::object()});
    }
    return out;
  }
  void bind_kernels(AttnPlan& plan, const Json& spec, const Kernel& main) const override {
    bind_varlen_kernels(plan, spec, main);
    // A dense plan of two steps stages V first.
    if (const AttnSpec s = spec.get<AttnSpec>(); !s.varlen && plan.step_count == 2) {
      plan.steps[0].kernel = &get_kernel(v_stage_family(), v_stage_spec(int(s.head_dim)), Json::object());
    }
  }

  bool supports(const AttnProblem& problem, const Target& target) const override {
    // TMA coordinates are 32-bit.
    const bool fits = problem.seq_q < (std::int64_t{1} << 31) && problem.seq_k < (std::int64_t{1} << 31);
    if (problem.fp8_qkv && fp8_block_ns(problem.head_dim).empty()) return false;
    if (problem.kv_cache() && !sm90_serves_kv_chunk(problem, target)) return false;
    return runs_on(target) && fits && cujit::kSm90HeadDims.contains(int(problem.head_dim));
  }

  // Over a KV cache: the decode family's spec fields that say what the
  // cache is (paged, and the page size compiled in where TMA loads pages).
  AttnSpec spec_for(const AttnProblem& problem) const override {
    AttnSpec s = spec_of(problem);
    if (problem.kv_cache()) {
      s.kv_cache = true;
      s.paged = problem.page_size > 0;
      s.page_size = sm90_loads_pages_by_tma(problem.page_size) ? int(problem.page_size) : 0;
    }
    return s;
  }

  AttnPlan typed_plan(const AttnProblem& problem, const Sm90Config& c, const Target& target) const override {
    const std::int64_t m_blocks = (problem.seq_q + c.bm - 1) / c.bm;
    // A ragged batch's tiles are counted on the device; at most its slots.
    const std::int64_t tiles = problem.varlen ? varlen_tile_slots(problem, c.bm) * problem.heads_q
                                              : m_blocks * problem.heads_q * problem.batch;
    if (tiles >= (std::int64_t{1} << 31)) {
      throw Error(ErrorCode::Unsupported, fmt::format("{} tiles of {} rows exceed the sm90 scheduler's 32-bit index",
                                                      tiles, c.bm));
    }
    const std::int64_t slots = std::int64_t{target.sm_count} * cujit::sm90::ctas_per_sm(c.bm);
    AttnPlan plan;
    if (problem.varlen) add_varlen_prepare_step(plan, problem, c.bm, c.bn, varlen_attention_pdl(target));
    if (c.vt_staged) add_v_stage_step(plan, problem, c.bn);
    AttnStep& step = plan.add_step();
    // Persistent: one CTA per SM (two with BM = 64; at most one per tile)
    // walks the tiles.
    step.geometry.grid = {unsigned(slots > 0 ? std::min(tiles, slots) : tiles), 1, 1};
    step.geometry.block = {unsigned((c.bm / 64 + 1) * 128), 1, 1};
    step.geometry.smem_bytes = unsigned(layout_of(spec_of(problem), c).bytes);
    step.geometry.programmatic_dependent_launch = problem.varlen && varlen_attention_pdl(target);
    step.params_bytes = sizeof(cujit::Sm90AttnParams);
    step.params_align = alignof(cujit::Sm90AttnParams);
    const int heads = int(problem.heads_q * problem.batch);
    Sm90StepData d{};
    d.block_n = c.bn;
    d.m_blocks = int(m_blocks);
    d.total_tiles = int(tiles);
    // A ragged batch's order is its prepare step's (varlen_prepare.cu).
    const int group = problem.varlen ? 1 : int(tile_group_heads(problem, c.bm, c.bn, int(step.geometry.grid.x)));
    d.tile_divisor = cujit::make_fast_divisor(unsigned(group * d.m_blocks));
    d.group_divisor = cujit::make_fast_divisor(unsigned(group));
    d.last_group_divisor = cujit::make_fast_divisor(unsigned(last_group_heads(heads, group)));
    d.head_divisor = cujit::make_fast_divisor(unsigned(problem.heads_q));
    d.vt_staged = c.vt_staged;
    step.data.set(d);
    return plan;
  }

  void launch(const AttnPlan& plan, const AttnProblem& problem, const AttnTensors& t, void* workspace,
              Stream stream) const override {
    if (problem.varlen && !t.varlen_tiles_ready) launch_varlen_prepare(plan.steps[0], problem, t, workspace, stream);
    const AttnStep& step = plan.steps[std::size_t(plan.step_count - 1)];
    const Sm90StepData d = step.data.get<Sm90StepData>();
    cujit::Sm90AttnParams p{};
    p.q = cached_tensor_map(t.q, 64);
    // With no keys the kernel loads no K/V block, but TMA cannot describe an
    // empty tensor: give it Q's map, never read.
    const bool no_keys = problem.seq_k == 0;
    // Nor are gathered pages' K and V read by TMA (kv_loader.cuh).
    const bool gathered = problem.page_size > 0 && !sm90_loads_pages_by_tma(problem.page_size);
    const bool kv_maps = !no_keys && !gathered;
    // A page pool's boxes are a page's rows (or a block's, where a page holds
    // several): kv_loader.cuh.
    const int kv_box_rows = problem.page_size > 0 ? std::min(int(problem.page_size), d.block_n) : d.block_n;
    p.k = kv_maps ? cached_tensor_map(t.k, kv_box_rows) : p.q;
    if (d.vt_staged && !no_keys) {
      const StagedV staged = launch_v_stage(plan.steps[0], t.v, workspace, stream);
      p.v = cached_tensor_map(staged.view, int(problem.head_dim));
      p.vt_blocks = staged.blocks;
    } else {
      p.v = kv_maps ? cached_tensor_map(t.v, kv_box_rows) : p.q;
    }
    if (problem.kv_cache()) {
      p.seq_lens = t.seq_lens;
      p.block_table = t.block_table;
      p.table_stride = t.table_stride;
      p.num_pages = problem.page_size > 0 ? kernel_page_count(t.k) : 0;
      if (gathered) p.page_divisor = cujit::make_fast_divisor(unsigned(problem.page_size));
    }
    p.o = cached_tensor_map(t.out, 64);
    p.attn = make_attn_params(problem, t.q, t.k, t.v, t.out, t.lse);
    if (problem.fp8_qkv) set_fp8_descales(p.attn, t);
    if (problem.varlen) {
      const VarlenTileList list = varlen_tile_list(workspace);
      p.attn.varlen_tiles = list.tiles;
      p.attn.varlen_tile_count = list.count;
    }
    p.m_blocks = d.m_blocks;
    p.total_tiles = d.total_tiles;
    p.group_heads = int(d.group_divisor.divisor);
    p.pairs = int(problem.batch * problem.heads_q);
    p.tile_divisor = d.tile_divisor;
    p.group_divisor = d.group_divisor;
    p.last_group_divisor = d.last_group_divisor;
    p.head_divisor = d.head_divisor;
    step.kernel->launch(step.geometry, p, stream);
  }

  static bool runs_on(const Target& target) { return target.arch == "sm_90a"; }
};

}  // namespace

const AttentionFamily& sm90_attention_family() {
  static const Sm90AttentionFamily family;
  return family;
}

bool sm90_serves_kv_chunk(const AttnProblem& problem, const Target& target) {
  return Sm90AttentionFamily::runs_on(target) && problem.kv_cache() && problem.seq_q >= kSm90KvChunkRows &&
         !problem.fp8_kv && !problem.fp8_qkv && !problem.varlen &&
         cujit::kSm90HeadDims.contains(int(problem.head_dim));
}

bool sm90_loads_pages_by_tma(std::int64_t page_size) {
  return page_size >= kSm90TmaPageRows && compiles_page_size(page_size);
}

FamilyRegistration sm90_registration() {
  auto requirements = [](const AttnProblem& problem, const Target& target) {
    return fmt::format("an sm_90a GPU (this is {}) and head dim {} (this is {}; 128 or 256 with e4m3 inputs)",
                       target.arch, head_dims_text(cujit::kSm90HeadDims, " or "), problem.head_dim);
  };
  return {&sm90_attention_family(), "sm90", cujit::kSm90HeadDims, &Sm90AttentionFamily::runs_on,
          requirements};
}

}  // namespace jit::detail
