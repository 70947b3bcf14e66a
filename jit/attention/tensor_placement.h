// Where the attention tensors live, checked against the device that will run
// the kernel: a host pointer or another GPU's memory would otherwise be a
// launch that faults (or reads the wrong GPU's memory through peer mappings)
// instead of an error naming the tensor.
#pragma once
#include "jit/device.h"
#include "jit/tensor.h"
#include "jit/varlen.h"

namespace jit::detail {

// Throws Error(InvalidArgument) naming the first of q, k, v, out, lse (lse may
// be null) that is not memory of `device`'s GPU: device memory of that GPU or
// managed memory are accepted; pageable or pinned host memory, memory of
// another GPU and addresses the driver does not know are refused.
void check_placement(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                     const float* lse, const DeviceInfo& device);

// The same for one pointer the kernel reads, named `name` in the error.
void check_pointer_placement(const char* name, const void* data, const DeviceInfo& device);

// A plan made in `plan_context` runs there only: Error(InvalidArgument)
// when `device` (the current context's) is another.
void check_plan_context(CUcontext plan_context, const DeviceInfo& device);

// A ragged batch's prefix sums (when it has sequences), which its prepare
// kernel reads.
void check_varlen_placement(const VarlenBatch& batch, const DeviceInfo& device);

}  // namespace jit::detail
