// The ragged-batch call of the C interface (cujit_c.h): jit::attention_varlen
// (jit/varlen.h) with the same status and message convention as the rest
// (c_api_support.h).
#include <cstddef>

#include "bindings/c/c_api_support.h"
#include "bindings/c/cujit_c.h"
#include "jit/varlen.h"

// The layout bindings/python/cujit/_structs.py mirrors with ctypes (natural
// alignment, LP64): a change here is an ABI change (CUJIT_C_ABI_VERSION).
static_assert(sizeof(cujit_varlen_batch) == 40 && offsetof(cujit_varlen_batch, batch) == 16);

namespace {

jit::VarlenBatch batch_of(const cujit_varlen_batch* b) {
  if (b == nullptr) cujit_c::null_argument("batch");
  jit::VarlenBatch batch;
  batch.cu_seqlens_q = b->cu_seqlens_q;
  batch.cu_seqlens_k = b->cu_seqlens_k;
  batch.batch = b->batch;
  batch.max_seqlen_q = b->max_seqlen_q;
  batch.max_seqlen_k = b->max_seqlen_k;
  return batch;
}

}  // namespace

extern "C" {

cujit_status cujit_attention_varlen(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                    const cujit_tensor* out, const cujit_varlen_batch* batch,
                                    const cujit_options* options) {
  using cujit_c::view_of;
  return cujit_c::guarded([&] {
    jit::attention_varlen(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"), batch_of(batch),
                          cujit_c::attention_options_of(options));
  });
}

}  // extern "C"
