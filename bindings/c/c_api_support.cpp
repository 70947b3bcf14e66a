// The shared pieces of the C interface (c_api_support.h).
#include "bindings/c/c_api_support.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace cujit_c {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

jit::DType dtype_of(std::int32_t dtype, const std::string& name) {
  if (dtype == CUJIT_F16) return jit::DType::f16;
  if (dtype == CUJIT_BF16) return jit::DType::bf16;
  if (dtype == CUJIT_E4M3) return jit::DType::e4m3;
  if (dtype == CUJIT_E5M2) return jit::DType::e5m2;
  throw jit::Error(jit::ErrorCode::InvalidArgument,
                   name + " is " + std::to_string(dtype) + ", not CUJIT_F16, CUJIT_BF16, CUJIT_E4M3 or CUJIT_E5M2");
}

jit::TensorView view_of(const cujit_tensor* t, const std::string& name) {
  if (t == nullptr) throw jit::Error(jit::ErrorCode::InvalidArgument, name + " is NULL");
  jit::TensorView v;
  v.data = t->data;
  v.dtype = dtype_of(t->dtype, name + ".dtype");
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = t->shape[i];
    v.strides[i] = t->strides[i];
  }
  return v;
}

jit::AttentionOptions attention_options_of(const cujit_options* o) {
  jit::AttentionOptions a;
  if (o == nullptr) return a;
  a.causal = o->causal != 0;
  a.align = o->bottom_right != 0 ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  if (o->scale != 0.f) a.scale = o->scale;
  a.stream = static_cast<jit::Stream>(o->stream);
  a.lse = o->lse;
  a.descale.q = o->q_descale;
  a.descale.k = o->k_descale;
  a.descale.v = o->v_descale;
  if (o->has_descale_strides) a.descale.strides = std::array<std::int64_t, 2>{o->descale_strides[0], o->descale_strides[1]};
  return a;
}

void null_argument(const char* name) {
  throw jit::Error(jit::ErrorCode::InvalidArgument, std::string(name) + " is NULL");
}

void check_text_buffer(const char* buffer, std::size_t size, const char* caller) {
  if (buffer == nullptr || size == 0) {
    throw jit::Error(jit::ErrorCode::InvalidArgument, std::string(caller) + " needs a buffer of at least 1 byte");
  }
}

void copy_text(const std::string& text, char* buffer, std::size_t size) {
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

}  // namespace cujit_c
