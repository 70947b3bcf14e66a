// The serving API (jit/serving.h): plans over a KV cache, made once per batch
// composition and run many times, and the one-call form over them.
#include "jit/serving.h"

#include <cuda.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <random>
#include <unordered_map>

#include "jit/attention/family_registry.h"
#include "jit/attention/kv_contents_check.h"
#include "jit/attention/fp8_checks.h"
#include "jit/attention/kv_validation.h"
#include "jit/attention/shape_key.h"
#include "jit/attention/stream_workspace.h"
#include "jit/attention/tensor_placement.h"
#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/knobs.h"

namespace jit {

struct KvAttentionPlan::Impl {
  KvAttentionShape shape;
  detail::AttnProblem problem;
  const detail::AttentionFamily* family = nullptr;
  Json spec, config;
  detail::AttnPlan plan;
  DeviceBuffer workspace;
  CUcontext context = nullptr;

  void launch(const TensorView& q, const KvCache& cache, const TensorView& out, const KvRunOptions& run,
              void* workspace_memory) const {
    detail::AttnTensors tensors{q, cache.k, cache.v, out, run.lse, cache.block_table, detail::table_stride_of(cache),
                                cache.seq_lens};
    tensors.k_descale = cache.k_descale;
    tensors.v_descale = cache.v_descale;
    tensors.descale_strides = detail::descale_strides_of(problem, cache);
    family->launch(plan, problem, tensors, workspace_memory, run.stream);
  }
};

namespace {

constexpr std::uint64_t kTuningPageSeed = 0x9e3779b97f4a7c15;

// Inputs for timing candidates: q, the cache (a shuffled block table when
// paged) and the lengths, all of the plan's shape, zero-filled (the kernels'
// time does not depend on the values). Large caches are timed on fewer
// sequences: a config's rank does not change with the batch once the GPU is
// full, and the caller's cache is already in memory.
struct TuningInputs {
  detail::AttnProblem problem;
  DeviceBuffer q, out, k, v, table, lengths, descale;
  TensorView q_view, out_view, k_view, v_view;
  std::int64_t pages_per_seq = 0;

  explicit TuningInputs(const detail::AttnProblem& full) : problem(full) {
    constexpr std::int64_t kMaxCacheBytes = std::int64_t{512} << 20;
    const DType kv_dtype = full.kv_dtype();
    const auto kv_bytes = std::int64_t(element_size(kv_dtype));
    const std::int64_t per_sequence =
        2 * full.heads_kv * std::max<std::int64_t>(full.seq_k, 1) * full.head_dim * kv_bytes;
    problem.batch = std::clamp<std::int64_t>(kMaxCacheBytes / per_sequence, 1, full.batch);
    const std::int64_t b = problem.batch, d = problem.head_dim, dtype_bytes = 2;
    auto zeroed = [](std::size_t bytes) {
      DeviceBuffer buffer(bytes);
      if (bytes != 0) CUJIT_CU_CHECK(detail::driver().cuMemsetD8(reinterpret_cast<CUdeviceptr>(buffer.data()), 0, bytes));
      return buffer;
    };
    q = zeroed(std::size_t(b * problem.heads_q * problem.seq_q * d * dtype_bytes));
    out = zeroed(q.size());
    q_view = TensorView::bhsd(q.data(), problem.dtype, b, problem.heads_q, problem.seq_q, d);
    out_view = TensorView::bhsd(out.data(), problem.dtype, b, problem.heads_q, problem.seq_q, d);
    if (problem.page_size > 0) {
      pages_per_seq = std::max<std::int64_t>((problem.seq_k + problem.page_size - 1) / problem.page_size, 1);
      const std::int64_t pages = b * pages_per_seq;
      k = zeroed(std::size_t(pages * problem.heads_kv * problem.page_size * d * kv_bytes));
      v = zeroed(k.size());
      k_view = TensorView::bshd(k.data(), kv_dtype, pages, problem.page_size, problem.heads_kv, d);
      v_view = TensorView::bshd(v.data(), kv_dtype, pages, problem.page_size, problem.heads_kv, d);
      // The pages in a fixed random order over the pool, as an engine's pool
      // holds them after many allocations and frees: in order, a paged
      // cache reads as a contiguous one, and the tuner would pick the
      // contiguous decode's config (shallower rings, which cover less of
      // the latency that scattered pages add).
      std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), std::mt19937_64(kTuningPageSeed));
      table = DeviceBuffer(ids.size() * sizeof(std::int32_t));
      table.upload(ids.data(), table.size());
    } else {
      const std::int64_t keys = std::max<std::int64_t>(problem.seq_k, 1);
      k = zeroed(std::size_t(b * problem.heads_kv * keys * d * kv_bytes));
      v = zeroed(k.size());
      k_view = TensorView::bhsd(k.data(), kv_dtype, b, problem.heads_kv, keys, d);
      v_view = TensorView::bhsd(v.data(), kv_dtype, b, problem.heads_kv, keys, d);
    }
    if (problem.fp8_kv) descale = zeroed(sizeof(float));  // one factor for all, {0, 0} strides
    if (problem.seq_lens) {
      const std::vector<std::int32_t> all(static_cast<std::size_t>(b), std::int32_t(problem.seq_k));
      lengths = DeviceBuffer(all.size() * sizeof(std::int32_t));
      lengths.upload(all.data(), lengths.size());
    }
  }
};

// `own_workspace`: allocate the plan's own workspace (plans made by
// plan_kv_attention; the one-call form uses the stream's).
std::unique_ptr<KvAttentionPlan::Impl> make_plan(const detail::AttnProblem& problem, const KvAttentionShape& shape,
                                                 Stream stream, bool own_workspace) {
  const detail::DeviceInfo& device = detail::current_device();
  auto impl = std::make_unique<KvAttentionPlan::Impl>();
  impl->shape = shape;
  impl->problem = problem;
  impl->context = device.context;
  detail::check_fp8_target(problem, device.target);
  impl->family = &detail::attention_family_for(problem, device.target);
  const detail::AttentionFamily& family = *impl->family;
  impl->spec = family.spec_for(problem);
  std::optional<TuningInputs> inputs;
  std::optional<DeviceBuffer> scratch_workspace;
  auto run = [&](const Kernel& kernel, const Json& config, Stream s) {
    if (!inputs) inputs.emplace(problem);
    detail::AttnPlan plan = family.plan(inputs->problem, config, device.target);
    family.bind_kernels(plan, impl->spec, kernel);
    if (!scratch_workspace || scratch_workspace->size() < plan.workspace_bytes) {
      scratch_workspace.emplace(plan.workspace_bytes);
    }
    const TuningInputs& in = *inputs;
    detail::AttnTensors tensors{in.q_view,  in.k_view, in.v_view, in.out_view, nullptr,
                                static_cast<const std::int32_t*>(in.table.data()), in.pages_per_seq,
                                static_cast<const std::int32_t*>(in.lengths.data())};
    tensors.k_descale = tensors.v_descale = static_cast<const float*>(in.descale.data());
    family.launch(plan, in.problem, tensors, scratch_workspace->data(), s);
  };
  impl->config = choose_config(family, impl->spec, family.bucket(problem), run, stream);
  impl->plan = detail::load_plan(family, problem, impl->config, device.target);
  if (own_workspace) impl->workspace = DeviceBuffer(impl->plan.workspace_bytes);
  return impl;
}

}  // namespace

KvAttentionPlan::KvAttentionPlan() = default;
KvAttentionPlan::~KvAttentionPlan() = default;
KvAttentionPlan::KvAttentionPlan(KvAttentionPlan&&) noexcept = default;
KvAttentionPlan& KvAttentionPlan::operator=(KvAttentionPlan&&) noexcept = default;

KvAttentionPlan plan_kv_attention(const KvAttentionShape& shape, const KvAttentionOptions& options, Stream stream) {
  const detail::AttnProblem problem = detail::kv_problem_of(shape, options);
  KvAttentionPlan plan;
  plan.impl_ = make_plan(problem, shape, stream, true);
  return plan;
}

namespace {

// Every pointer a run reads or writes is memory of this GPU: the tensors,
// the LSE, the block table, the lengths and an FP8 cache's descale factors.
void check_kv_placement(const TensorView& q, const KvCache& cache, const TensorView& out, const KvRunOptions& run,
                        const detail::DeviceInfo& device) {
  detail::check_placement(q, cache.k, cache.v, out, run.lse, device);
  if (cache.block_table != nullptr) detail::check_pointer_placement("cache.block_table", cache.block_table, device);
  if (cache.seq_lens != nullptr) detail::check_pointer_placement("cache.seq_lens", cache.seq_lens, device);
  if (cache.k_descale != nullptr) detail::check_pointer_placement("cache.k_descale", cache.k_descale, device);
  if (cache.v_descale != nullptr) detail::check_pointer_placement("cache.v_descale", cache.v_descale, device);
}

const KvAttentionPlan::Impl& impl_of(const std::unique_ptr<KvAttentionPlan::Impl>& impl) {
  if (!impl) throw Error(ErrorCode::InvalidArgument, "this KvAttentionPlan is empty: make it with jit::plan_kv_attention");
  return *impl;
}

void check_run_device(const KvAttentionPlan::Impl& impl, const TensorView& q, const KvCache& cache,
                      const TensorView& out, const KvRunOptions& run) {
  const detail::DeviceInfo& device = detail::current_device();
  detail::check_plan_context(impl.context, device);
  check_kv_placement(q, cache, out, run, device);
}

}  // namespace

void KvAttentionPlan::run(const TensorView& q, const KvCache& cache, const TensorView& out,
                          const KvRunOptions& run) const {
  const Impl& impl = impl_of(impl_);
  detail::check_kv_run(impl.problem, q, cache, out, run, impl.plan.workspace_bytes);
  if (impl.problem.empty()) return;
  check_run_device(impl, q, cache, out, run);
  if (detail::knobs().check) detail::check_kv_contents(impl.problem, cache, run.stream);
  impl.launch(q, cache, out, run, run.workspace != nullptr ? run.workspace : impl.workspace.data());
}

const KvAttentionShape& KvAttentionPlan::shape() const { return impl_of(impl_).shape; }
std::size_t KvAttentionPlan::workspace_bytes() const { return impl_of(impl_).plan.workspace_bytes; }
int KvAttentionPlan::num_splits() const { return impl_of(impl_).plan.key_splits; }
std::string KvAttentionPlan::family() const { return impl_of(impl_).family->name(); }
std::string KvAttentionPlan::variant() const {
  const Impl& impl = impl_of(impl_);
  return impl.family->variant_name(impl.spec, impl.config);
}
Json KvAttentionPlan::config() const { return impl_of(impl_).config; }

void attention_with_kvcache(const TensorView& q, const KvCache& cache, const TensorView& out,
                            const KvAttentionOptions& options, const KvRunOptions& run) {
  const KvAttentionShape shape = detail::kv_shape_of(q, cache);
  const detail::AttnProblem problem = detail::kv_problem_of(shape, options);
  detail::check_kv_run(problem, q, cache, out, run, 0);
  if (problem.empty()) return;
  const detail::DeviceInfo& device = detail::current_device();
  check_kv_placement(q, cache, out, run, device);
  if (detail::knobs().check) detail::check_kv_contents(problem, cache, run.stream);
  // The plans of the exact problems seen on each context, kept for the
  // process (bounded, as the dense path's are).
  constexpr std::size_t kMaxPlans = 1024;
  static std::mutex mutex;
  static std::unordered_map<detail::ShapeKey, std::shared_ptr<const KvAttentionPlan::Impl>, detail::ShapeKeyHash>
      plans;
  const detail::ShapeKey key{device.context, problem};
  std::shared_ptr<const KvAttentionPlan::Impl> impl;
  {
    std::lock_guard lock(mutex);
    if (auto it = plans.find(key); it != plans.end()) impl = it->second;
  }
  if (!impl) {
    impl = make_plan(problem, shape, run.stream, false);
    if (!detail::stream_is_capturing(run.stream)) {  // an untuned choice is not kept
      std::lock_guard lock(mutex);
      if (plans.size() >= kMaxPlans) plans.clear();
      plans.emplace(key, impl);
    }
  }
  // The library's per-stream workspace, not the plan's (calls on different
  // streams may share a plan), nor run.workspace: the caller cannot know this
  // plan's size.
  void* workspace = detail::stream_workspace(run.stream, impl->plan.workspace_bytes);
  impl->launch(q, cache, out, run, workspace);
}

}  // namespace jit
