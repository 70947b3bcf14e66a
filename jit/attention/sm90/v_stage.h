// The FP8 V staging step of the sm90 family (kernel_src/attention/sm90/
// v_stage.cu): a companion kernel that a dense FP8 plan with a vt_staged
// config launches before its attention kernel, writing V transposed into the
// plan's workspace in the order the kernel's shared ring wants it.
#pragma once
#include <cstdint>

#include "jit/attention/attention_family.h"
#include "jit/tensor.h"

namespace jit::detail {

const KernelFamily& v_stage_family();
Json v_stage_spec(int head_dim);

// Adds the staging step (step 0 of the plan) and sizes the plan's workspace
// for it. Throws Error(Unsupported) when the staging's rows pass TMA's
// 32-bit coordinates or the batch the grid.
void add_v_stage_step(AttnPlan& plan, const AttnProblem& problem, int block_n);

// What the attention kernel reads: the staging as a [1, 1, rows, 128] view of
// bytes (its TMA boxes are (128, D)), and the key blocks per (batch, KV head).
struct StagedV {
  TensorView view;
  int blocks = 0;
};

// Launches `step` (made by add_v_stage_step) over `v` into `workspace`.
StagedV launch_v_stage(const AttnStep& step, const TensorView& v, void* workspace, Stream stream);

}  // namespace jit::detail
