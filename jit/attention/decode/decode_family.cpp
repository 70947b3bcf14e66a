// The split-KV decode family: kernel_src/attention/decode/.
#include "jit/attention/decode/decode_family.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <optional>
#include <span>

#include "jit/attention/decode/decode_combine.h"
#include "jit/attention/fp8_checks.h"
#include "jit/attention/kv_validation.h"
#include "jit/error.h"
#include "jit/kernel_sources.h"
#include "jit/knobs.h"
#include "kernel_src/attention/decode/decode_layout.h"
#include "kernel_src/attention/decode/decode_params.h"
#include "kernel_src/attention/head_dims.h"

namespace jit::detail {
namespace {

struct DecodeConfig {
  int bn, stages, warps;
  // The products by warpgroup MMAs (sm_90a, 16-bit caches, blocks of 64
  // rows; attn_decode.cu, WG). Written only when set, so that the other
  // configs' records read as before.
  bool wg = false;
};
void to_json(Json& j, const DecodeConfig& c) {
  j = Json{{"bn", c.bn}, {"stages", c.stages}, {"warps", c.warps}};
  if (c.wg) j["wg"] = true;
}
void from_json(const Json& j, DecodeConfig& c) {
  j.at("bn").get_to(c.bn);
  j.at("stages").get_to(c.stages);
  j.at("warps").get_to(c.warps);
  c.wg = j.value("wg", false);
}

// What launch() needs beyond the problem, fixed by the plan.
struct DecodeStepData {
  int splits;
  int split_keys;
  bool cluster_merge;  // the splits merge within their cluster (no combine step)
};

// The kernel tile's head dim, its template's D: two KV heads side by side
// when paired (attn_decode.cu, PAIRED).
int tile_head_dim(const AttnSpec& s) { return s.paired_kv_heads ? 2 * s.head_dim : s.head_dim; }

// On sm_90 a variant that carries the cluster merge (attn_decode.cu) merges
// a row block's 2 to kMaxDecodeClusterSplits splits within their
// thread-block cluster, through distributed shared memory: no combine pass
// (its launch, its wait for the whole grid and the parts' round trip through
// global memory cost about 3 us a call on the H100), no workspace. Its
// shared memory keeps room for the CTA's part.
bool merges_in_clusters(const AttnSpec& s, const Target& target) {
  return target.cc >= 90 && cujit::decode_cluster_mergeable(tile_head_dim(s), s.block_m);
}

// A token-major FP8 cache at head dim 64 with at most 4 packed rows per KV
// head and an even number of KV heads is decoded two KV heads a CTA, as one
// of head dim 128 (attn_decode.cu, PAIRED): each key's K and V rows are read
// 128 bytes at a time rather than 64, and the 8-row tile is full. Head-major
// caches keep one KV head a CTA: paired, each thread's two heads are two
// streams, and the decode measured 16% slower (docs/perf-log.md, "decode v8").
bool pairs_kv_heads(const AttnProblem& p) {
  return p.fp8_kv && p.kv_token_major && p.head_dim == 64 && p.heads_kv % 2 == 0 && 2 * decode_packed_rows(p) <= 8;
}
int ctas_kv_heads(const AttnProblem& p) { return int(pairs_kv_heads(p) ? p.heads_kv / 2 : p.heads_kv); }

// The page size a paged variant is compiled for (attn_decode.cu,
// kPageSteps), 0 for the sizes (1, or 7) that one variant reads from its
// parameters. (Validation caps page sizes at 256.)
int compiled_page_size(std::int64_t page_size) { return compiles_page_size(page_size) ? int(page_size) : 0; }

// Packed rows per CTA: the query heads sharing a KV head times the new rows,
// rounded up to whole 16-row m-tiles, at most 64 (more rows take more CTAs).
// Up to 8 rows (a GQA group of 8 or fewer, one new row each) take a block
// of 8, whose warps compute with the keys as the MMA's rows
// (attention/decode/keys_as_rows.cuh): half the padded rows of a 16-row tile.
int block_m_for(std::int64_t packed_rows) {
  if (packed_rows <= 8) return 8;
  if (packed_rows <= 16) return 16;
  if (packed_rows <= 32) return 32;
  return 64;
}

// Registers per thread: the fp32 O (D / 2) and scores (keys per warp / 2), Q's
// fragments when they stay in registers (D <= 128), each half as many for a
// block of 8 rows (a warp's 8 rows against the 16 of the others), and about 96 for
// addresses and the softmax (112 at D = 256, whose 16-byte chunks take more
// load passes), from the ptxas reports. An FP8 cache read as bf16 goes
// through f16 and f32 (no direct conversion): at D = 128 with 64 keys a
// warp, ptxas takes all 255 registers and spills in 13 of 40 such variants
// (sm_90a, sm_89), so those count as over. So does an e5m2 cache read as
// bf16 at head dim 64 with 128 keys a warp of 16 rows: 7 of its 30 variants
// spilled 8-32 bytes at 255 registers on sm_90a (the e4m3 ones fit).
int estimated_registers(const AttnSpec& s, const DecodeConfig& c) {
  const int key_warps = c.warps / cujit::decode_row_warps(s.block_m);
  const int keys_per_warp = c.bn / key_warps;
  const int warp_rows = std::min(s.block_m, 16);
  const int d = tile_head_dim(s);
  if (c.wg) return d / 2 + keys_per_warp / 2 + 96;  // Q stays in shared memory
  const bool fp8_to_bf16 = s.fp8_kv && s.dtype == DType::bf16;
  const bool e5m2_wide =
      fp8_to_bf16 && s.fp8_format == DType::e5m2 && d == 64 && keys_per_warp == 128 && warp_rows == 16;
  return (d / 2 + keys_per_warp / 2 + (d <= 128 ? d / 4 : 0)) * warp_rows / 16 + (d > 128 ? 112 : 96) +
         (fp8_to_bf16 ? 32 : 0) + (e5m2_wide ? 16 : 0);
}

// The configs sm_90a's ptxas (CUDA 13.0) spills over a contiguous 16-bit
// cache, f16 and bf16 out alike: 16 at register targets it picks for itself
// (96, 128 or 168: ptxas aims at more CTAs per SM on its own), 12 at 255.
// Their neighbours one pipeline stage apart compile without spilling, so no
// estimate states them: they are listed, from the sweep of every decode
// variant through NVRTC (docs/perf-log.md, "Spills across the whole decode
// space"), and cujit_compile_full_tests checks that nothing else spills.
// The tuner's spill guard (jit/choose_config.cpp) covers what another ptxas
// decides.
struct SpillingConfig {
  int head_dim;
  bool causal;
  int block_m, bn, stages, warps;
};
constexpr SpillingConfig kSm90ContiguousSpills[] = {
    {64, false, 8, 64, 3, 2},    {64, false, 8, 64, 6, 2},    {64, false, 16, 64, 2, 2},  {64, false, 32, 32, 3, 2},
    {64, false, 32, 32, 6, 2},   {64, true, 8, 64, 6, 2},     {64, true, 16, 128, 2, 4},  {128, true, 32, 32, 6, 4},
    {128, true, 32, 64, 3, 2},   {128, true, 32, 64, 6, 2},   {256, false, 32, 32, 3, 4}, {256, false, 32, 32, 4, 4},
    {256, false, 32, 32, 6, 4},  {256, true, 32, 64, 2, 8},
};

// And those with descale factors per page, all at 32 rows, 64-key blocks and
// two warps over an e4m3 pool read as f16 (listed for both FP8 formats; read
// as bf16 they are over the register estimate): causal at three stages (56
// bytes at 255 registers in the sweep of all 4,230 such variants, decode
// v9), and since the factors are copied once a block (decode v10, the sweep
// of the 886 sm_90a ones at head dim 128 and 256) causal at six stages (24
// bytes) and non-causal at three (8 bytes).
constexpr SpillingConfig kSm90PageDescaleSpills[] = {
    {128, true, 32, 64, 3, 2}, {128, true, 32, 64, 6, 2}, {128, false, 32, 64, 3, 2}};

// And 16-bit pools with a compiled page size (attn_decode.cu, kPageSteps),
// from the sweep of the 4,390 sm_90a page-16 variants: 32 rows in 64-key
// blocks of two warps at head dim 128, causal, at two, three and six stages
// (120-128 bytes at 255 registers); at head dim 64, 32 rows in 128-key
// blocks at two stages, four warps (48 bytes) or eight, causal (16 bytes),
// at ptxas's own target of 128 registers. Listed for every compiled page
// size, whose code differs from page 16's only where a page holds several
// blocks.
constexpr SpillingConfig kSm90PagedStepsSpills[] = {
    {128, true, 32, 64, 2, 2}, {128, true, 32, 64, 3, 2},  {128, true, 32, 64, 6, 2},
    {64, false, 32, 128, 2, 4}, {64, true, 32, 128, 2, 8}};

bool spills_on_sm90(const AttnSpec& s, const DecodeConfig& c, const Target& target) {
  if (target.cc != 90 || c.wg) return false;
  auto listed = [&](std::span<const SpillingConfig> list) {
    return std::ranges::any_of(list, [&](const SpillingConfig& x) {
      return x.head_dim == s.head_dim && x.causal == s.causal && x.block_m == s.block_m && x.bn == c.bn &&
             x.stages == c.stages && x.warps == c.warps;
    });
  };
  if (s.page_descale) return listed(kSm90PageDescaleSpills);
  if (!s.fp8_kv && s.paged && s.page_size != 0) return listed(kSm90PagedStepsSpills);
  return !s.fp8_kv && !s.paged && listed(kSm90ContiguousSpills);
}

// D = 256 in blocks of 16 rows or more fits the registers without spilling
// only as sm_90's ptxas allocates them, and with four warps or more (ptxas
// reports for sm_80/sm_89); over an FP8 cache, whose conversions take a few
// more, not at all. A block of 8 rows (half the O and Q registers per
// thread) fits everywhere: every config, both caches, all three targets
// (cujit_compile_full_tests).
std::optional<std::string> why_head_dim_256_is_out(const AttnSpec& s, const DecodeConfig& c, const Target& target) {
  if (s.head_dim <= 128 || s.block_m == 8) return std::nullopt;
  if (s.fp8_kv) return fmt::format("head dim {} over an FP8 cache spills past 8 query rows per KV head", s.head_dim);
  if (target.cc < 90) return fmt::format("head dim {} spills on {}: sm_90 only", s.head_dim, target.arch);
  if (c.warps < 4) return fmt::format("head dim {} with {} warps spills", s.head_dim, c.warps);
  return std::nullopt;
}

int kv_bytes(const AttnSpec& s) { return s.fp8_kv ? 1 : 2; }

// Warpgroup MMAs (attn_decode.cu, WG) need sm_90a and 16-bit K and V (the
// FP8 path converts in registers, which a shared-memory operand skips), at
// head dim 64 or 128 (O's fp32 at 256 would take every register), in blocks
// of 64 rows, an MMA's M: 32 rows padded to 64 measured 8-10% slower than the
// 16-row warps' mma.sync in every config (MQA at 32 query heads), 64 rows
// faster (docs/perf-log.md, "decode v16"). Each warpgroup takes 64 or 128
// keys of a block, the N of one MMA, and the ring leads by one block less
// than its stages (attn_decode.cu, kLead).
std::optional<std::string> why_not_warpgroup_mma(const AttnSpec& s, const DecodeConfig& c, const Target& target) {
  if (!c.wg) return std::nullopt;
  if (target.cc != 90) return fmt::format("warpgroup MMAs need sm_90a, not {}", target.arch);
  if (s.fp8_kv) return "warpgroup MMAs read 16-bit K and V, not an FP8 cache";
  if (s.head_dim > 128) return fmt::format("warpgroup MMAs at head dim {} spill: 64 or 128 only", s.head_dim);
  if (s.block_m != 64) return fmt::format("blocks of {} rows: warpgroup MMAs take blocks of 64", s.block_m);
  if (c.warps % 4 != 0) return fmt::format("{} warps are not whole warpgroups", c.warps);
  if (c.stages < 3) return "warpgroup MMAs keep a stage for the last block's P V: at least 3 stages";
  if (const int keys = c.bn / (c.warps / 4); keys != 64 && keys != 128) {
    return fmt::format("{} keys a warpgroup: 64 or 128", keys);
  }
  return std::nullopt;
}

int smem_bytes(const AttnSpec& s, const DecodeConfig& c, const Target& target) {
  return cujit::decode_smem_bytes(tile_head_dim(s), s.block_m, c.bn, c.stages, c.warps, s.paged, kv_bytes(s),
                                  merges_in_clusters(s, target),
                                  cujit::decode_page_factor_heads(s.page_descale, s.paired_kv_heads)) +
         (c.wg ? cujit::kDecodeWgAlign : 0);
}

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Workspace of a split plan: the parts' O, then their log-sum-exps.
std::size_t partial_o_bytes(const AttnProblem& p, int splits) {
  const std::int64_t elements = p.batch * p.heads_kv * decode_packed_rows(p) * p.head_dim;
  return align_up(std::size_t(splits) * std::size_t(elements) * 4, 256);
}
std::size_t partial_lse_bytes(const AttnProblem& p, int splits) {
  return align_up(std::size_t(splits) * std::size_t(p.batch * p.heads_kv * decode_packed_rows(p)) * 4, 256);
}

class DecodeAttentionFamily final : public TypedAttentionFamily<DecodeConfig> {
 public:
  std::string name() const override { return "attn_decode"; }

  const KernelSources& sources() const override { return embedded_sources("attention/decode/attn_decode.cu"); }

  bool memory_bound() const override { return true; }

  AttnSpec spec_for(const AttnProblem& problem) const override {
    AttnSpec s = spec_of(problem);  // fp8_kv included
    s.paged = problem.page_size > 0;
    s.block_m = block_m_for(decode_packed_rows(problem));
    s.paired_kv_heads = pairs_kv_heads(problem);
    s.page_descale = problem.descale_per_page;
    s.page_size = compiled_page_size(problem.page_size);
    return s;
  }

  std::vector<AttnSpec> spec_variants(const AttnSpec& base) const override {
    std::vector<AttnSpec> specs;
    // Each spec, and over a paged FP8 cache its twin with factors per page.
    auto push = [&](AttnSpec s) {
      specs.push_back(s);
      if (s.fp8_kv && s.paged) {
        s.page_descale = true;
        specs.push_back(s);
      }
    };
    const std::optional<DType> caches[] = {std::nullopt, DType::e4m3, DType::e5m2};  // 16-bit, FP8 formats
    for (const std::optional<DType> fp8 : caches)
      for (bool paged : {false, true})
        for (int block_m : {8, 16, 32, 64}) {
          AttnSpec s = base;
          s.fp8_kv = fp8.has_value();
          s.fp8_format = fp8.value_or(DType::e4m3);
          s.paged = paged;
          s.block_m = block_m;
          push(s);
          if (paged) {  // and compiled for the common page size
            s.page_size = 16;
            push(s);
            s.page_size = 0;
          }
          if (s.fp8_kv && s.head_dim == 64 && block_m == 8) {
            s.paired_kv_heads = true;
            push(s);
          }
        }
    return specs;
  }

  Json bucket(const AttnProblem& p) const override {
    auto pow2 = [](std::int64_t n, std::int64_t floor) {
      return std::int64_t(std::bit_ceil(std::uint64_t(std::max(n, floor))));
    };
    Json bucket = {{"rows", pow2(decode_packed_rows(p), 1)},
                   {"group", pow2(p.group(), 1)},
                   {"page", p.page_size > 0 ? pow2(p.page_size, 1) : 0},
                   {"splits", p.num_splits}};
    // One split is asked for batch-invariant results: then the config (whose
    // block size orders the sums) must not change with the batch either, so
    // one tuning serves every batch size and length.
    if (p.num_splits != 1) {
      bucket["seq_k"] = pow2(p.seq_k, 256);
      bucket["batch_kv"] = pow2(p.batch * p.heads_kv, 1);
    }
    return bucket;
  }

  std::vector<DecodeConfig> typed_config_space(const AttnSpec&) const override {
    std::vector<DecodeConfig> space;
    for (int bn : {32, 64, 128})
      for (int warps : {2, 4, 8})
        for (int stages : {2, 3, 4, 6, 8}) space.push_back({bn, stages, warps});
    // Warpgroup MMAs: one warpgroup, or two that share each block's keys,
    // 64 or 128 keys each; a stage of the ring is the last block's P V's.
    for (int bn : {64, 128})
      for (int warps : {4, 8})
        for (int stages : {3, 4, 6, 8}) space.push_back({bn, stages, warps, true});
    return space;
  }

  std::optional<std::string> typed_why_pruned(const AttnSpec& s, const DecodeConfig& c,
                                              const Target& target) const override {
    // Mirrors the static_asserts at the top of attn_decode.
    if (!cujit::kDecodeHeadDims.contains(s.head_dim)) return fmt::format("head dim {} is not instantiated", s.head_dim);
    if (s.paired_kv_heads && !(s.fp8_kv && s.head_dim == 64 && s.block_m == 8)) {
      return "paired KV heads: an FP8 cache at head dim 64 in blocks of 8 rows";
    }
    if (s.page_descale && !(s.fp8_kv && s.paged)) return "descale factors per page: a paged FP8 cache";
    if (s.page_size != 0 && !s.paged) return "a compiled page size: a paged cache";
    const int d = tile_head_dim(s);
    if (s.fp8_kv && fp8_needs_sm89(s.fp8_format) && target.cc < 89) {
      return fmt::format("an {} cache needs sm_89 or newer, not {}", kernel_dtype_name(s.fp8_format), target.arch);
    }
    if (s.block_m != 8 && (s.block_m % 16 != 0 || s.block_m < 16 || s.block_m > 64)) {
      return fmt::format("BM {} is not 8, 16, 32, 48 or 64", s.block_m);
    }
    if (auto why = why_not_warpgroup_mma(s, c, target)) return why;
    const int row_warps = cujit::decode_row_warps(s.block_m);
    if (c.warps % row_warps != 0) return fmt::format("{} warps do not tile {} rows of 16", c.warps, row_warps);
    const int key_warps = c.warps / row_warps;
    if (c.bn % (16 * key_warps) != 0) return fmt::format("BN {} is not 16 keys for each of {} warps", c.bn, key_warps);
    if (c.stages < 2) return "the K/V ring needs at least 2 stages";
    if (s.paged && c.bn > 32 * c.warps) return fmt::format("paged: BN {} keys need as many threads", c.bn);
    const int rows_per_pass = c.warps * 32 / (d * kv_bytes(s) / 16);
    if (rows_per_pass == 0 || c.bn % rows_per_pass != 0) return "the threads do not cover a block in whole passes";
    if (const int passes = c.bn / rows_per_pass; s.paged && passes > cujit::kMaxPagedLoadPasses) {
      return fmt::format("paged: {} load passes per block spill (at most {})", passes, cujit::kMaxPagedLoadPasses);
    }
    if (const int smem = smem_bytes(s, c, target); smem > target.max_smem_per_block) {
      return fmt::format("needs {} bytes of shared memory, {} allows {}: lower BN or STAGES", smem, target.arch,
                         target.max_smem_per_block);
    }
    if (auto why = why_head_dim_256_is_out(s, c, target)) return why;
    if (spills_on_sm90(s, c, target)) return fmt::format("ptxas spills this config on {}", target.arch);
    if (const int regs = estimated_registers(s, c); regs > 255) {
      return fmt::format("needs about {} registers per thread (limit 255, it would spill)", regs);
    }
    return std::nullopt;
  }

  DecodeConfig typed_default_config(const AttnSpec& s, const Target& target) const override {
    // 64-key blocks, three deep: 64 KiB of K/V in flight per CTA at D = 128
    // (128-key blocks over an FP8 cache, for the same bytes). Smaller rings
    // where shared memory is short (D = 256 on sm_89).
    if (s.fp8_kv && !typed_why_pruned(s, DecodeConfig{128, 3, 4}, target)) return {128, 3, 4};
    for (const DecodeConfig c : {DecodeConfig{64, 3, 4}, DecodeConfig{64, 2, 4}, DecodeConfig{32, 3, 2},
                                 DecodeConfig{32, 2, 2}, DecodeConfig{32, 2, 4}, DecodeConfig{64, 2, 8},
                                 DecodeConfig{32, 2, 8}}) {
      if (!typed_why_pruned(s, c, target)) return c;
    }
    throw Error(ErrorCode::Unsupported,
                fmt::format("no decode config fits {} for head dim {}", target.arch, s.head_dim));
  }

  std::string typed_variant_name(const AttnSpec& s, const DecodeConfig& c) const override {
    return fmt::format("attn_decode_d{}_{}{}{}{}{}{}{}_bm{}_bn{}_st{}_w{}{}", s.head_dim, kernel_dtype_name(s.dtype),
                       s.fp8_kv ? fmt::format("_kv{}", kernel_dtype_name(s.fp8_format)) : "",
                       s.paired_kv_heads ? "_kvheads2" : "", s.causal ? "_causal" : "", s.paged ? "_paged" : "",
                       s.page_size != 0 ? fmt::format("{}", s.page_size) : "", s.page_descale ? "_pagescale" : "",
                       s.block_m, c.bn, c.stages, c.warps, c.wg ? "_wg" : "");
  }

  std::string typed_name_expression(const AttnSpec& s, const DecodeConfig& c) const override {
    // PAGE, the 13th argument, only where set: the other variants keep their names.
    return fmt::format("cujit::decode::attn_decode<{}, {}, {}, {}, {}, cujit::{}, cujit::{}, {}, {}, {}, {}, {}{}>",
                       tile_head_dim(s), s.block_m, c.bn, c.stages, c.warps, kernel_dtype_name(s.dtype),
                       kernel_dtype_name(s.fp8_kv ? s.fp8_format : s.dtype), s.causal ? "true" : "false",
                       s.paged ? "true" : "false", s.paired_kv_heads ? "true" : "false",
                       s.page_descale ? "true" : "false", c.wg ? "true" : "false",
                       s.page_size != 0 ? fmt::format(", {}", s.page_size) : "");
  }

  bool supports(const AttnProblem& p, const Target& target) const override {
    if (!runs_on(target) || p.varlen || p.fp8_qkv || !decode_serves_head_dim(p, target)) return false;
    // An FP8 cache: its format's conversions.
    if (p.fp8_kv && fp8_needs_sm89(p.fp8_format) && target.cc < 89) return false;
    // Dense problems with few rows per KV head; everything over a cache
    // (the registry gives long chunks to the sm90 family where it runs).
    return p.kv_cache() || (p.seq_q <= 16 && decode_packed_rows(p) <= kDecodeMaxDenseRows);
  }

  // Lengths and page ids: a branch on them is like a branch on a shape.
  std::vector<int> index_param_offsets(const Json&, const Json&) const override {
    return {int(offsetof(cujit::DecodeParams, seq_lens)), int(offsetof(cujit::DecodeParams, block_table))};
  }

  std::vector<Companion> companions(const Json& spec) const override {
    const AttnSpec s = spec.get<AttnSpec>();
    return {{&decode_combine_family(), decode_combine_spec(s.dtype, s.head_dim), Json::object()}};
  }

  void bind_kernels(AttnPlan& plan, const Json& spec, const Kernel& main) const override {
    plan.steps[0].kernel = &main;
    if (plan.step_count > 1) {
      const AttnSpec s = spec.get<AttnSpec>();
      plan.steps[1].kernel = &get_kernel(decode_combine_family(), decode_combine_spec(s.dtype, s.head_dim), Json::object());
    }
  }

  AttnPlan typed_plan(const AttnProblem& problem, const DecodeConfig& c, const Target& target) const override {
    const AttnSpec s = spec_for(problem);
    const std::int64_t rows = decode_packed_rows(problem);
    const std::int64_t m_blocks = s.paired_kv_heads ? 1 : (rows + s.block_m - 1) / s.block_m;
    const std::int64_t ctas = problem.batch * ctas_kv_heads(problem) * m_blocks;
    const std::int64_t key_blocks = (problem.seq_k + c.bn - 1) / c.bn;
    const int smem = smem_bytes(s, c, target);
    std::int64_t splits = problem.num_splits;
    if (splits == 0) {
      // As many CTAs as the SMs hold at once, never more (a second, partial
      // wave would cost as much as the first), while each split keeps at
      // least four key blocks (the prologue and merge cost about one block).
      const int threads = 32 * c.warps;
      const int per_sm = std::max(1, std::min({(target.max_smem_per_block + 1024) / (smem + 1024), 2048 / threads,
                                               65536 / (threads * 192)}));
      const std::int64_t slots = std::int64_t{std::max(target.sm_count, 1)} * per_sm;
      splits = std::clamp<std::int64_t>(slots / std::max<std::int64_t>(ctas, 1), 1,
                                        std::max<std::int64_t>(key_blocks / 4, 1));
      splits = std::min<std::int64_t>(splits, cujit::kMaxDecodeSplits);
    }
    const std::int64_t blocks_per_split = std::max<std::int64_t>((key_blocks + splits - 1) / splits, 1);
    splits = std::max<std::int64_t>((key_blocks + blocks_per_split - 1) / blocks_per_split, 1);
    if (splits * m_blocks >= (std::int64_t{1} << 31)) {
      throw Error(ErrorCode::Unsupported, fmt::format("{} splits of {} row blocks exceed the grid", splits, m_blocks));
    }
    const bool pdl = target.cc >= 90 && knobs().pdl;
    const bool cluster_merge = merges_in_clusters(s, target) && splits > 1 && splits <= cujit::kMaxDecodeClusterSplits;

    AttnPlan plan;
    AttnStep& step = plan.add_step();
    step.geometry.grid = {unsigned(splits * m_blocks), unsigned(ctas_kv_heads(problem)), unsigned(problem.batch)};
    step.geometry.block = {unsigned(32 * c.warps), 1, 1};
    step.geometry.smem_bytes = unsigned(smem);
    step.geometry.programmatic_dependent_launch = pdl;
    step.geometry.cluster_x = cluster_merge ? unsigned(splits) : 1;  // a cluster: one row block's splits
    step.params_bytes = sizeof(cujit::DecodeParams);
    step.params_align = alignof(cujit::DecodeParams);
    step.data.set(DecodeStepData{int(splits), int(blocks_per_split * c.bn), cluster_merge});
    plan.key_splits = int(splits);
    if (splits > 1 && !cluster_merge) {
      AttnStep& combine = plan.add_step();
      combine.geometry = decode_combine_geometry(problem.batch * problem.heads_kv * rows);
      combine.geometry.programmatic_dependent_launch = pdl;
      combine.params_bytes = sizeof(cujit::DecodeCombineParams);
      combine.params_align = alignof(cujit::DecodeCombineParams);
      plan.workspace_bytes = partial_o_bytes(problem, int(splits)) + partial_lse_bytes(problem, int(splits));
    }
    return plan;
  }

  void launch(const AttnPlan& plan, const AttnProblem& problem, const AttnTensors& t, void* workspace,
              Stream stream) const override {
    const AttnStep& step = plan.steps[0];
    const DecodeStepData d = step.data.get<DecodeStepData>();
    const bool combine_pass = d.splits > 1 && !d.cluster_merge;
    if (combine_pass && workspace == nullptr) {
      throw Error(ErrorCode::Internal, "a split decode plan was launched without its workspace");
    }
    const int group = int(problem.group());
    cujit::DecodeParams p{};
    p.q = t.q.data;
    p.k = t.k.data;
    p.v = t.v.data;
    p.o = t.out.data;
    p.lse = t.lse;
    for (int i = 0; i < 3; ++i) {
      p.q_stride[i] = t.q.strides[i];
      p.k_stride[i] = t.k.strides[i];
      p.v_stride[i] = t.v.strides[i];
      p.o_stride[i] = t.out.strides[i];
    }
    p.block_table = problem.page_size > 0 ? t.block_table : nullptr;
    p.table_stride = t.table_stride;
    p.seq_lens = problem.seq_lens ? t.seq_lens : nullptr;
    if (problem.fp8_kv) {
      p.k_descale = t.k_descale;
      p.v_descale = t.v_descale;
      p.descale_stride[0] = t.descale_strides[0];
      p.descale_stride[1] = t.descale_strides[1];
    }
    if (combine_pass) {
      p.partial_o = static_cast<float*>(workspace);
      p.partial_lse2 =
          reinterpret_cast<float*>(static_cast<char*>(workspace) + partial_o_bytes(problem, d.splits));
    }
    p.batch = int(problem.batch);
    p.heads_kv = int(problem.heads_kv);
    p.seq_q = int(problem.seq_q);
    p.seq_k = int(problem.seq_k);
    p.group = group;
    p.rows = int(decode_packed_rows(problem));
    p.num_pages = problem.page_size > 0 ? kernel_page_count(t.k) : 0;
    p.group_div = cujit::make_fast_divisor(unsigned(group));
    p.page_div = cujit::make_fast_divisor(unsigned(std::max(problem.page_size, 1)));
    p.split_keys = d.split_keys;
    p.splits = d.splits;
    p.cluster_merge = d.cluster_merge ? 1 : 0;
    p.scale_log2 = float(double(problem.scale) * 1.4426950408889634);
    p.causal_offset = problem.causal_offset;
    step.kernel->launch(step.geometry, p, stream);
    if (combine_pass) {
      const AttnStep& combine = plan.steps[1];
      cujit::DecodeCombineParams c{};
      c.partial_o = p.partial_o;
      c.partial_lse2 = p.partial_lse2;
      c.o = t.out.data;
      c.lse = t.lse;
      for (int i = 0; i < 3; ++i) c.o_stride[i] = t.out.strides[i];
      c.batch = p.batch;
      c.heads_kv = p.heads_kv;
      c.seq_q = p.seq_q;
      c.group = group;
      c.rows = p.rows;
      c.splits = d.splits;
      c.group_div = p.group_div;
      c.rows_div = cujit::make_fast_divisor(unsigned(p.rows));
      c.heads_kv_div = cujit::make_fast_divisor(unsigned(p.heads_kv));
      combine.kernel->launch(combine.geometry, c, stream);
    }
  }

  static bool runs_on(const Target& target) { return target.cc >= 80; }
};

}  // namespace

std::int64_t decode_packed_rows(const AttnProblem& p) {
  return p.group() * p.seq_q;
}

bool decode_serves_head_dim(const AttnProblem& p, const Target& target) {
  if (!cujit::kDecodeHeadDims.contains(int(p.head_dim))) return false;
  if (p.head_dim <= 128 || (target.cc >= 90 && !p.fp8_kv)) return true;
  return decode_packed_rows(p) <= kDecodeNarrowHeadDim256Rows;  // why_head_dim_256_is_out
}

const AttentionFamily& decode_attention_family() {
  static const DecodeAttentionFamily family;
  return family;
}

FamilyRegistration decode_registration() {
  auto requirements = [](const AttnProblem& problem, const Target& target) {
    return fmt::format("an sm_80 or newer GPU, head dim 64 or 128 or 256 (256 with more than {} query rows per KV "
                       "head: sm_90 and a 16-bit cache) (this is {} and head dim {}), q in f16 or bf16 (an e4m3 "
                       "cache: sm_89 or newer), dense batches, and a KV cache or at most 16 query rows and {} "
                       "query rows per KV head (this is {} and {})",
                       kDecodeNarrowHeadDim256Rows, target.arch, problem.head_dim, kDecodeMaxDenseRows, problem.seq_q,
                       decode_packed_rows(problem));
  };
  return {&decode_attention_family(), "decode", cujit::kDecodeHeadDims, &DecodeAttentionFamily::runs_on,
          requirements};
}

}  // namespace jit::detail
