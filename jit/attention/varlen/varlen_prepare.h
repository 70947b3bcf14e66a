// The prepare step of a ragged batch's plan (kernel_src/attention/varlen/
// varlen_prepare.cu): a companion kernel that the sm90 and portable families
// launch before their attention kernel, and the workspace they share (the
// tile count, then the tiles).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "jit/attention/attention_family.h"
#include "kernel_src/attention/varlen/varlen_params.h"

namespace jit::detail {

const KernelFamily& varlen_prepare_family();

// What the sm90 and portable families share for ragged batches: each spec
// comes dense and ragged ("varlen": true), and with `fp8_inputs` each of
// those again with e4m3 q, k and v; a ragged spec's companion is the prepare
// step, and its index parameters are AttnParams's tile list, at
// `attn_offset` in the kernel's parameter struct.
std::vector<AttnSpec> dense_and_ragged(const AttnSpec& base, bool fp8_inputs);
std::vector<AttentionFamily::Companion> varlen_companions(const Json& spec);
std::vector<int> varlen_index_params(const Json& spec, int attn_offset);

// Causal: the keys of one group of sequences in the prepare step's order,
// as many as keep their K and V (every KV head) in the share of L2 the
// dense kernel's tile groups use (jit/attention/l2_share.h).
int varlen_group_key_rows(const AttnProblem& problem);

// Tile slots a plan with BM-row tiles reserves for `problem`.
std::int64_t varlen_tile_slots(const AttnProblem& problem, int bm);

// Adds the prepare step (step 0 of a ragged plan) and sizes the plan's
// workspace for it. Throws Error(Unsupported) when the tiles times the heads
// pass the kernels' 32-bit tile index. `pdl`: launched with programmatic
// dependent launch (varlen_attention_pdl), so that its launch overlaps the
// end of the kernel before it.
void add_varlen_prepare_step(AttnPlan& plan, const AttnProblem& problem, int bm, int bn, bool pdl);

// Whether a ragged plan's steps launch with programmatic dependent launch
// (sm_90+, CUJIT_PDL): the prepare step's launch overlaps the end of the
// kernel before it, and the attention kernel's CTAs start while the prepare
// step runs; each waits (griddepcontrol.wait) before it reads anything the
// kernel before it writes.
bool varlen_attention_pdl(const Target& target);

// A ragged spec's plan: step 0 the prepare kernel, the others `main`; a
// dense one's: every step `main`.
void bind_varlen_kernels(AttnPlan& plan, const Json& spec, const Kernel& main);

// The prepare step's outputs in a plan's workspace.
struct VarlenTileList {
  const cujit::VarlenTile* tiles;
  const int* count;
};
VarlenTileList varlen_tile_list(void* workspace);

// Launches step 0 for these tensors; `first_bad` (or null) receives the
// first sequence whose cu_seqlens entries are wrong (an atomic min: set it
// to INT32_MAX first).
void launch_varlen_prepare(const AttnStep& step, const AttnProblem& problem, const AttnTensors& tensors,
                           void* workspace, Stream stream, int* first_bad = nullptr);

// CUJIT_CHECK=1: runs the prepare step on its own, synchronizes and throws
// Error(InvalidArgument) naming the first wrong cu_seqlens entry.
void check_varlen_contents(const AttnProblem& problem, const AttnTensors& tensors, Stream stream);

}  // namespace jit::detail
