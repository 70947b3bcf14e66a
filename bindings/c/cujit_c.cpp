// The C interface (cujit_c.h) over jit::attention: converts the structs and
// runs every call through guarded() (c_api_support.h). The serving half is
// in cujit_c_serving.cpp, ragged batches in cujit_c_varlen.cpp.
#include "bindings/c/cujit_c.h"

#include <cstddef>
#include <string>

#include "bindings/c/c_api_support.h"
#include "jit/attention.h"

// The layout bindings/python/cujit/_structs.py mirrors with ctypes (natural
// alignment, LP64): a change here is an ABI change (CUJIT_C_ABI_VERSION).
static_assert(sizeof(cujit_options) == 80 && offsetof(cujit_options, q_descale) == 32 &&
              offsetof(cujit_options, descale_strides) == 56 && offsetof(cujit_options, has_descale_strides) == 72);

using cujit_c::attention_options_of;
using cujit_c::guarded;
using cujit_c::view_of;

extern "C" {

int cujit_c_abi_version(void) { return CUJIT_C_ABI_VERSION; }

cujit_status cujit_attention(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                             const cujit_tensor* out, const cujit_options* options) {
  return guarded([&] {
    jit::attention(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"),
                   attention_options_of(options));
  });
}

cujit_status cujit_plan(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v, const cujit_tensor* out,
                        const cujit_options* options, char* buffer, size_t size) {
  return guarded([&] {
    cujit_c::check_text_buffer(buffer, size, "cujit_plan");
    const jit::AttentionPlan plan =
        jit::plan_attention(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"),
                            attention_options_of(options));
    cujit_c::copy_text(plan.family + "/" + plan.variant, buffer, size);
  });
}

const char* cujit_last_error(void) { return cujit_c::last_error().c_str(); }

}  // extern "C"
