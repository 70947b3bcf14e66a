#include "jit/attention/background_attention_tuning.h"

#include <cuda.h>

#include <optional>
#include <utility>

#include "jit/background_tuning.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/tensor.h"

namespace jit::detail {
namespace {

// A stream of the worker's own. Non-blocking: it never waits for, nor
// makes anything wait on, the legacy default stream, which a caller's
// capture may have made unusable.
class OwnStream {
 public:
  OwnStream() { CUJIT_CU_CHECK(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)); }
  ~OwnStream() {
    driver().cuStreamSynchronize(stream_);  // buffers are freed after their last use
    driver().cuStreamDestroy(stream_);
  }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  Stream get() const { return reinterpret_cast<Stream>(stream_); }

 private:
  CUstream stream_ = nullptr;
};

// Zero-filled inputs and output of the problem's shape, contiguous: a
// kernel's time does not depend on the values. FP8 inputs get one descale
// factor for all.
struct ScratchTensors {
  DeviceBuffer q, k, v, out, descale;
  TensorView q_view, k_view, v_view, out_view;

  ScratchTensors(const AttnProblem& p, Stream stream) {
    auto zeroed = [&](std::int64_t elements, std::size_t element_bytes) {
      DeviceBuffer buffer(std::size_t(elements) * element_bytes);
      if (buffer.size() != 0) {
        CUJIT_CU_CHECK(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(buffer.data()), 0, buffer.size(),
                                                reinterpret_cast<CUstream>(stream)));
      }
      return buffer;
    };
    q = zeroed(p.batch * p.heads_q * p.seq_q * p.head_dim, element_size(p.q_dtype()));
    out = zeroed(p.batch * p.heads_q * p.seq_q * p.head_dim, element_size(p.dtype));
    k = zeroed(p.batch * p.heads_kv * p.seq_k * p.head_dim, element_size(p.kv_dtype()));
    v = zeroed(p.batch * p.heads_kv * p.seq_k * p.head_dim, element_size(p.kv_dtype()));
    if (p.fp8_qkv) descale = zeroed(1, sizeof(float));
    q_view = TensorView::bhsd(q.data(), p.q_dtype(), p.batch, p.heads_q, p.seq_q, p.head_dim);
    out_view = TensorView::bhsd(out.data(), p.dtype, p.batch, p.heads_q, p.seq_q, p.head_dim);
    k_view = TensorView::bhsd(k.data(), p.kv_dtype(), p.batch, p.heads_kv, p.seq_k, p.head_dim);
    v_view = TensorView::bhsd(v.data(), p.kv_dtype(), p.batch, p.heads_kv, p.seq_k, p.head_dim);
  }

  AttnTensors tensors() const {
    AttnTensors t{q_view, k_view, v_view, out_view, nullptr};
    t.q_descale = t.k_descale = t.v_descale = static_cast<const float*>(descale.data());
    return t;  // descale_strides {0, 0}: the one factor
  }
};

Json tune_on_worker(const AttentionFamily& family, const Json& spec, const Json& bucket, const AttnProblem& problem,
                    CUcontext context, const Target& target) {
  CUJIT_CU_CHECK(driver().cuCtxSetCurrent(context));
  // A caller's capture in global mode makes "unsafe" calls (allocations,
  // synchronizations, module loads) illegal on every thread in that mode;
  // this thread works outside any capture, so it opts out.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CUJIT_CU_CHECK(driver().cuThreadExchangeStreamCaptureMode(&mode));
  const OwnStream stream;
  const ScratchTensors in(problem, stream.get());
  std::optional<DeviceBuffer> workspace;
  auto run = [&](const Kernel& kernel, const Json& config, Stream s) {
    AttnPlan plan = family.plan(problem, config, target);
    family.bind_kernels(plan, spec, kernel);
    if (!workspace || workspace->size() < plan.workspace_bytes) {
      CUJIT_CU_CHECK(driver().cuStreamSynchronize(reinterpret_cast<CUstream>(s)));  // the old one may be in use
      workspace.emplace(plan.workspace_bytes);
    }
    family.launch(plan, problem, in.tensors(), workspace ? workspace->data() : nullptr, s);
  };
  return choose_config_until(family, spec, bucket, run, stream.get(),
                             [] { return background_tuner().stopping(); });
}

}  // namespace

std::shared_ptr<const autotune::TuningTicket> start_background_tuning(const AttentionFamily& family, const Json& spec,
                                                                      const Json& bucket, const AttnProblem& problem,
                                                                      const DeviceInfo& device) {
  // Copies: the job runs after this call has returned.
  return background_tuner().submit(tuning_slot(family, spec, bucket),
                                   [&family, spec, bucket, problem, context = device.context, target = device.target] {
                                     return tune_on_worker(family, spec, bucket, problem, context, target);
                                   });
}

}  // namespace jit::detail
