// The C interface (cujit_c.h) over jit::attention: converts the structs,
// catches every exception, keeps its message per thread.
#include "bindings/c/cujit_c.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "jit/attention.h"
#include "jit/error.h"

namespace {

thread_local std::string last_error;

jit::TensorView view_of(const cujit_tensor* t, const char* name) {
  if (t == nullptr) throw jit::Error(jit::ErrorCode::InvalidArgument, std::string(name) + " is NULL");
  if (t->dtype != CUJIT_F16 && t->dtype != CUJIT_BF16) {
    throw jit::Error(jit::ErrorCode::InvalidArgument,
                     std::string(name) + ".dtype is " + std::to_string(t->dtype) + ", not CUJIT_F16 or CUJIT_BF16");
  }
  jit::TensorView v;
  v.data = t->data;
  v.dtype = t->dtype == CUJIT_F16 ? jit::DType::f16 : jit::DType::bf16;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = t->shape[i];
    v.strides[i] = t->strides[i];
  }
  return v;
}

jit::AttentionOptions options_of(const cujit_options* o) {
  jit::AttentionOptions a;
  if (o == nullptr) return a;
  a.causal = o->causal != 0;
  a.align = o->bottom_right != 0 ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  if (o->scale != 0.f) a.scale = o->scale;
  a.stream = static_cast<jit::Stream>(o->stream);
  a.lse = o->lse;
  return a;
}

// Runs f, turning any exception into a status and this thread's message.
template <class F>
cujit_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return CUJIT_OK;
  } catch (const jit::Error& e) {
    last_error = e.what();
    return static_cast<cujit_status>(static_cast<int>(e.code()) + 1);
  } catch (const std::bad_alloc&) {
    last_error = "out of host memory";
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
  } catch (...) {
    last_error = "internal error: unknown exception";
  }
  return CUJIT_INTERNAL;
}

}  // namespace

extern "C" {

int cujit_c_abi_version(void) { return CUJIT_C_ABI_VERSION; }

cujit_status cujit_attention(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                             const cujit_tensor* out, const cujit_options* options) {
  return guarded([&] {
    jit::attention(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"), options_of(options));
  });
}

cujit_status cujit_plan(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v, const cujit_tensor* out,
                        const cujit_options* options, char* buffer, size_t size) {
  return guarded([&] {
    if (buffer == nullptr || size == 0) {
      throw jit::Error(jit::ErrorCode::InvalidArgument, "cujit_plan needs a buffer of at least 1 byte");
    }
    const jit::AttentionPlan plan =
        jit::plan_attention(view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(out, "out"),
                            options_of(options));
    const std::string text = plan.family + "/" + plan.variant;
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  });
}

const char* cujit_last_error(void) { return last_error.c_str(); }

}  // extern "C"
