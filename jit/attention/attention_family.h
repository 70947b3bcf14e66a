// Kernel families that implement attention: what one serves, and the plan of
// launches it makes for a problem. Families are found through the registry
// (family_registry.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "jit/attention/attention_problem.h"
#include "jit/kernel_family.h"
#include "jit/typed_kernel_family.h"

namespace jit::detail {

// What one step's kernel parameters need beyond the tensors, computed once
// when the plan is made (tile counts, divisors, the tile order): a family
// keeps its own plain struct here, so a plan is fixed-size and the hot path
// copies it without allocating.
class AttnStepData {
 public:
  template <class T>
  void set(const T& value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kBytes && alignof(T) <= alignof(std::max_align_t));
    std::memcpy(bytes_.data(), &value, sizeof(T));
  }
  template <class T>
  T get() const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kBytes);
    T value;
    std::memcpy(&value, bytes_.data(), sizeof(T));
    return value;
  }
  bool operator==(const AttnStepData& other) const = default;

 private:
  static constexpr std::size_t kBytes = 64;
  alignas(std::max_align_t) std::array<unsigned char, kBytes> bytes_{};
};

// One launch of a plan.
struct AttnStep {
  const Kernel* kernel = nullptr;  // set by load_plan
  LaunchGeometry geometry;
  std::size_t params_bytes = 0, params_align = 0;  // the kernel's parameter struct
  AttnStepData data;
};

// The launches that compute one problem with one config, in order, and the
// device workspace they share (a split decode's parts, a ragged batch's
// tiles, FP8 V staged transposed). Launching a plan allocates nothing and
// synchronizes nothing, so it can be captured in a CUDA graph.
struct AttnPlan {
  static constexpr int kMaxSteps = 4;
  std::array<AttnStep, kMaxSteps> steps{};
  int step_count = 0;
  std::size_t workspace_bytes = 0;
  int key_splits = 1;  // parts each row's keys are split into (then merged)
  AttnStep& add_step() { return steps.at(std::size_t(step_count++)); }
};

// The tensors of one call. For a paged cache k and v are the page pools
// ([num_pages, Hkv, page_size, D]) and block_table has table_stride int32
// per sequence; seq_lens (when the problem has them) holds B key counts.
// A ragged batch's q, k, v, out are [1, H, total, D].
struct AttnTensors {
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  const TensorView& out;
  float* lse;
  const std::int32_t* block_table = nullptr;
  std::int64_t table_stride = 0;
  const std::int32_t* seq_lens = nullptr;
  // A ragged batch's prefix sums ([batch + 1] each, on the device).
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  // FP8 data's descale factors (q's for FP8 attention, k's and v's for it
  // and for an FP8 cache) and their {batch, KV head} strides.
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  std::array<std::int64_t, 2> descale_strides{};
  // A ragged batch whose tile list the workspace already holds (made by
  // VarlenAttentionPlan::prepare): the prepare step is not launched again.
  bool varlen_tiles_ready = false;

  // The same inputs written to another output (a tuning candidate's scratch).
  AttnTensors with_output(const TensorView& other_out, float* other_lse) const {
    return {q,         k,         v,         other_out, other_lse, block_table, table_stride, seq_lens, cu_seqlens_q,
            cu_seqlens_k, q_descale, k_descale, v_descale, descale_strides, varlen_tiles_ready};
  }
};

// FP8 attention's descale factors from the call's tensors into the kernel
// parameters (every forward family's).
void set_fp8_descales(cujit::AttnParams& params, const AttnTensors& tensors);

// An attention family: a KernelFamily that also knows which problems it
// serves and how to launch them.
class AttentionFamily : public KernelFamily {
 public:
  // What the kernel for `problem` is specialized on.
  virtual AttnSpec spec_for(const AttnProblem& problem) const { return spec_of(problem); }
  // Every spec this family instantiates for a (dtype, head dim, causal)
  // spec: the base itself, or one per value of its own spec fields.
  virtual std::vector<AttnSpec> spec_variants(const AttnSpec& base) const { return {base}; }
  // The problem-size fields of the tune key: one tuning serves the problems
  // of one bucket.
  virtual Json bucket(const AttnProblem& problem) const { return attention_bucket(problem); }
  // Kernels of other families a plan also launches (a combine pass), so that
  // warm-up compiles them too.
  struct Companion {
    const KernelFamily* family;
    Json spec, config;
  };
  virtual std::vector<Companion> companions(const Json& /*spec*/) const { return {}; }
  // Sets each step's kernel: `main` is the config's own; a step of a
  // companion gets it loaded here.
  virtual void bind_kernels(AttnPlan& plan, const Json& /*spec*/, const Kernel& main) const {
    for (int i = 0; i < plan.step_count; ++i) plan.steps[std::size_t(i)].kernel = &main;
  }
  // `problem` has passed validate_attention (so its tensors' strides and
  // addresses are 16-byte multiples).
  virtual bool supports(const AttnProblem& problem, const Target& target) const = 0;
  // The launches for `problem` with `config` on `target` (kernels not yet
  // loaded: load_plan does that).
  virtual AttnPlan plan(const AttnProblem& problem, const Json& config, const Target& target) const = 0;
  // Builds each step's parameters for these tensors and launches the steps
  // on `stream`; `workspace` holds plan.workspace_bytes of device memory.
  virtual void launch(const AttnPlan& plan, const AttnProblem& problem, const AttnTensors& tensors, void* workspace,
                      Stream stream) const = 0;
};

// An attention family on typed data: AttnSpec and the family's own Config
// struct; the JSON-facing methods are implemented once, here and in
// TypedKernelFamily.
template <class Config>
class TypedAttentionFamily : public TypedKernelFamily<AttnSpec, Config, AttentionFamily> {
 public:
  virtual AttnPlan typed_plan(const AttnProblem& problem, const Config& config, const Target& target) const = 0;
  AttnPlan plan(const AttnProblem& problem, const Json& config, const Target& target) const final {
    return typed_plan(problem, config.get<Config>(), target);
  }
};

// plan() with every step's kernel compiled (or found in the cache) and loaded
// in the current context: what launch() takes.
AttnPlan load_plan(const AttentionFamily& family, const AttnProblem& problem, const Json& config,
                   const Target& target);

}  // namespace jit::detail
