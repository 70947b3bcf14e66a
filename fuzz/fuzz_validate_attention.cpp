// Argument checking of jit::attention (detail::validate_attention) and of
// the C interface on any tensor views: shapes, strides, pointers, dtypes and
// options straight from the input, the overflowing ones included.
//
// Input (zero-padded): per tensor q, k, v, out: u64 address, u8 dtype
// (f16, bf16, e4m3), 4 x i64 shape, 4 x i64 strides; then u8 flags (causal,
// bottom-right, descale strides given), f32 scale (0: default), u64 lse
// address, 3 x u64 descale addresses (q, k, v), 2 x i64 descale strides.
// Mode byte: unused.
// Only jit::Error(InvalidArgument) may escape validation. A view it accepts
// is empty, or has a non-null 16-byte-aligned pointer and a byte extent that
// fits in the address space (recomputed in 128 bits). A refused call is
// refused by cujit_attention and cujit_plan too, with the same message; an
// accepted one is not run (no device work from a fuzzer).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "bindings/c/cujit_c.h"
#include "fuzz_support.h"
#include "jit/attention/attention_problem.h"
#include "jit/error.h"

namespace {

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  T next() {
    T value{};
    char raw[sizeof(T)] = {};
    if (pos_ < bytes_.size()) std::memcpy(raw, bytes_.data() + pos_, std::min(sizeof(T), bytes_.size() - pos_));
    pos_ += sizeof(T);
    std::memcpy(&value, raw, sizeof(T));
    return value;
  }

 private:
  const std::string& bytes_;
  std::size_t pos_ = 0;
};

bool fits_address_space(const jit::TensorView& t) {
  for (std::int64_t s : t.shape) {
    if (s == 0) return true;
  }
  unsigned __int128 last = 0;
  for (int i = 0; i < 4; ++i) last += (unsigned __int128)(t.shape[i] - 1) * (unsigned __int128)t.strides[i];
  const unsigned __int128 end =
      (unsigned __int128)reinterpret_cast<std::uintptr_t>(t.data) + (last + 1) * jit::element_size(t.dtype);
  if (end > (unsigned __int128)UINTPTR_MAX) return false;
  return t.data != nullptr && reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::Input in = fuzz::split(data, size);
  Reader r(in.rest);
  cujit_tensor c[4];
  jit::TensorView views[4];
  for (int t = 0; t < 4; ++t) {
    c[t] = {};
    c[t].data = reinterpret_cast<void*>(r.next<std::uint64_t>());
    const int code = r.next<std::uint8_t>() % 3;  // f16, bf16, e4m3
    c[t].dtype = code == 2 ? CUJIT_E4M3 : code == 1 ? CUJIT_BF16 : CUJIT_F16;
    for (auto& s : c[t].shape) s = r.next<std::int64_t>();
    for (auto& s : c[t].strides) s = r.next<std::int64_t>();
    views[t].data = c[t].data;
    views[t].dtype = code == 2 ? jit::DType::e4m3 : code == 1 ? jit::DType::bf16 : jit::DType::f16;
    for (int i = 0; i < 4; ++i) {
      views[t].shape[i] = c[t].shape[i];
      views[t].strides[i] = c[t].strides[i];
    }
  }
  cujit_options c_options{};
  const std::uint8_t flags = r.next<std::uint8_t>();
  c_options.causal = flags & 1;
  c_options.bottom_right = (flags >> 1) & 1;
  c_options.scale = r.next<float>();
  c_options.lse = reinterpret_cast<float*>(r.next<std::uint64_t>());
  jit::AttentionOptions options;
  options.causal = c_options.causal != 0;
  options.align = c_options.bottom_right ? jit::CausalAlign::BottomRight : jit::CausalAlign::TopLeft;
  if (c_options.scale != 0.f) options.scale = c_options.scale;
  options.lse = c_options.lse;
  c_options.q_descale = reinterpret_cast<const float*>(r.next<std::uint64_t>());
  c_options.k_descale = reinterpret_cast<const float*>(r.next<std::uint64_t>());
  c_options.v_descale = reinterpret_cast<const float*>(r.next<std::uint64_t>());
  for (auto& stride : c_options.descale_strides) stride = r.next<std::int64_t>();
  c_options.has_descale_strides = (flags >> 2) & 1;
  options.descale.q = c_options.q_descale;
  options.descale.k = c_options.k_descale;
  options.descale.v = c_options.v_descale;
  if (c_options.has_descale_strides) {
    options.descale.strides = std::array<std::int64_t, 2>{c_options.descale_strides[0], c_options.descale_strides[1]};
  }

  std::string refused;
  const cujit_status expected = CUJIT_INVALID_ARGUMENT;
  try {
    const jit::detail::AttnProblem p = jit::detail::validate_attention(views[0], views[1], views[2], views[3], options);
    for (const jit::TensorView& v : views) {
      if (!fits_address_space(v)) fuzz::violated("an accepted view is misaligned, NULL or past the address space");
      (void)v.numel();  // must not throw for an accepted view
    }
    if (p.batch != views[0].shape[0] || p.seq_k != views[1].shape[2]) fuzz::violated("the problem's sizes differ");
  } catch (const jit::Error& e) {
    if (e.code() != jit::ErrorCode::InvalidArgument) fuzz::violated("validation threw another error code");
    refused = e.what();
  }
  if (refused.empty()) return 0;
  if (cujit_attention(&c[0], &c[1], &c[2], &c[3], &c_options) != expected || refused != cujit_last_error()) {
    fuzz::violated("cujit_attention does not refuse what validation refuses, with its message");
  }
  char plan[64];
  if (cujit_plan(&c[0], &c[1], &c[2], &c[3], &c_options, plan, sizeof plan) != expected) {
    fuzz::violated("cujit_plan does not refuse what validation refuses");
  }
  return 0;
}
