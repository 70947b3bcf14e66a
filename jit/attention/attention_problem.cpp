#include "jit/attention/attention_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "jit/error.h"

namespace jit::detail {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

std::string shape_text(const TensorView& t) {
  return fmt::format("[{}, {}, {}, {}]", t.shape[0], t.shape[1], t.shape[2], t.shape[3]);
}

std::string strides_text(const TensorView& t) {
  return fmt::format("[{}, {}, {}, {}]", t.strides[0], t.strides[1], t.strides[2], t.strides[3]);
}

bool is_empty(const TensorView& t) {
  return std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
}

// Byte range [first, last) a view can touch (empty views touch nothing), or
// nullopt when it does not fit in the address space. Sizes and strides are
// non-negative here (check_view).
std::optional<std::pair<std::uintptr_t, std::uintptr_t>> checked_byte_extent(const TensorView& t) {
  if (is_empty(t)) return std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
  std::uint64_t last = 0;  // element offset of the last element
  for (int i = 0; i < 4; ++i) {
    std::uint64_t step = 0;
    if (__builtin_mul_overflow(std::uint64_t(t.shape[i] - 1), std::uint64_t(t.strides[i]), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return std::nullopt;
    }
  }
  std::uint64_t bytes = 0;
  std::uintptr_t end = 0;
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, element_size(t.dtype), &bytes) ||
      __builtin_add_overflow(base, bytes, &end)) {
    return std::nullopt;
  }
  return std::pair<std::uintptr_t, std::uintptr_t>{base, end};
}

std::pair<std::uintptr_t, std::uintptr_t> byte_extent(const TensorView& t) { return checked_byte_extent(t).value(); }

void check_view(const char* name, const TensorView& t) {
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] < 0) invalid(fmt::format("{} has a negative size in dimension {}: shape {}", name, i, shape_text(t)));
    if (t.strides[i] < 0) invalid(fmt::format("{} has a negative stride in dimension {}", name, i));
  }
  if (is_empty(t)) return;
  std::int64_t count = 0;
  if (__builtin_mul_overflow(t.shape[0], t.shape[1], &count) || __builtin_mul_overflow(count, t.shape[2], &count) ||
      __builtin_mul_overflow(count, t.shape[3], &count)) {
    invalid(fmt::format("{}'s shape {} has more elements than a 64-bit count holds", name, shape_text(t)));
  }
  if (!checked_byte_extent(t)) {
    invalid(fmt::format("{}'s shape {} and strides {} reach past the end of the address space from {}", name,
                        shape_text(t), strides_text(t), t.data));
  }
  if (t.data == nullptr) invalid(fmt::format("{} is a null pointer but has shape {}", name, shape_text(t)));
  if (t.strides[3] != 1) {
    invalid(fmt::format("{}'s last dimension must be contiguous (stride 1), got stride {}; make it contiguous "
                        "first (e.g. .contiguous())",
                        name, t.strides[3]));
  }
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) {
    invalid(fmt::format("{} must be 16-byte aligned for vector loads; its address is {}", name, t.data));
  }
  for (int i = 0; i < 3; ++i) {
    if (t.shape[i] > 1 && t.strides[i] % 8 != 0) {
      invalid(fmt::format("{}'s stride {} in dimension {} is not a multiple of 8 elements (16 bytes), which the "
                          "kernels' 16-byte loads need",
                          name, t.strides[i], i));
    }
  }
}

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto [a0, a1] = byte_extent(a);
  const auto [b0, b1] = byte_extent(b);
  return a0 < b1 && b0 < a1;
}

// True when two elements of the view share an address (a stride of 0, or
// rows closer than their length), so that writes through it would race:
// sorted by stride, each dimension must step past all of the ones inside it.
bool overlaps_itself(const TensorView& t) {
  if (is_empty(t)) return false;
  std::array<int, 4> dims{0, 1, 2, 3};
  std::sort(dims.begin(), dims.end(), [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  std::int64_t span = 1;  // elements covered by the dimensions inside
  for (int d : dims) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] < span) return true;
    // Past int64: no stride can step over it, so a further dimension overlaps.
    if (__builtin_mul_overflow(t.strides[d], t.shape[d], &span)) span = std::numeric_limits<std::int64_t>::max();
  }
  return false;
}

}  // namespace

AttnProblem validate_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options) {
  check_view("q", q);
  check_view("k", k);
  check_view("v", v);
  check_view("out", out);
  if (k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype) {
    invalid(fmt::format("q, k, v and out must share one dtype; got q {}, k {}, v {}, out {}", to_string(q.dtype),
                        to_string(k.dtype), to_string(v.dtype), to_string(out.dtype)));
  }
  if (k.shape != v.shape) {
    invalid(fmt::format("k and v must have the same shape; got k {} and v {}", shape_text(k), shape_text(v)));
  }
  if (k.shape[0] != q.shape[0]) {
    invalid(fmt::format("q and k must have the same batch size; got q {} and k {}", shape_text(q), shape_text(k)));
  }
  if (k.shape[3] != q.shape[3]) {
    invalid(fmt::format("q and k must have the same head dim; got q {} and k {}", shape_text(q), shape_text(k)));
  }
  if (out.shape != q.shape) {
    invalid(fmt::format("out must have q's shape {}; got {}", shape_text(q), shape_text(out)));
  }
  AttnProblem p;
  p.batch = q.shape[0];
  p.heads_q = q.shape[1];
  p.seq_q = q.shape[2];
  p.head_dim = q.shape[3];
  p.heads_kv = k.shape[1];
  p.seq_k = k.shape[2];
  p.dtype = q.dtype;
  if (p.heads_kv == 0 ? p.heads_q != 0 : p.heads_q % p.heads_kv != 0) {
    invalid(fmt::format("q's heads ({}) must be a multiple of k's and v's heads ({}) for grouped-query attention",
                        p.heads_q, p.heads_kv));
  }
  if (p.head_dim == 0) invalid("the head dim (last dimension of q, k, v) must not be 0");
  constexpr std::int64_t kMaxGrid = 65535;
  if (p.batch > kMaxGrid || p.heads_q > kMaxGrid) {
    invalid(fmt::format("batch ({}) and query heads ({}) must each be at most {}", p.batch, p.heads_q, kMaxGrid));
  }
  constexpr std::int64_t kMaxSeq = std::numeric_limits<std::int32_t>::max() / 2;
  if (p.seq_q > kMaxSeq || p.seq_k > kMaxSeq) {
    invalid(fmt::format("sequence lengths (q {}, k {}) must be below {}", p.seq_q, p.seq_k, kMaxSeq));
  }
  if (overlaps_itself(out)) {
    invalid(fmt::format("out's strides {} give different elements the same address (a stride of 0 or "
                        "overlapping rows), so writes to it would race: give out a layout of its own",
                        strides_text(out)));
  }
  if (!p.empty() && (overlaps(out, q) || overlaps(out, k) || overlaps(out, v))) {
    invalid("out overlaps q, k or v in memory; attention cannot write in place: give it a separate buffer");
  }
  if (options.lse != nullptr && reinterpret_cast<std::uintptr_t>(options.lse) % alignof(float) != 0) {
    invalid("lse must be 4-byte aligned (float32)");
  }
  p.causal = options.causal;
  p.causal_offset = options.causal && options.align == CausalAlign::BottomRight ? int(p.seq_k - p.seq_q) : 0;
  p.scale = options.scale ? *options.scale : float(1.0 / std::sqrt(double(p.head_dim)));
  if (!(p.scale > 0) || !std::isfinite(p.scale)) {
    invalid(fmt::format("scale must be a positive finite number, got {}", p.scale));
  }
  return p;
}

cujit::AttnParams make_attn_params(const AttnProblem& problem, const TensorView& q, const TensorView& k,
                                   const TensorView& v, const TensorView& out, float* lse) {
  cujit::AttnParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.o = out.data;
  p.lse = lse;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = q.strides[i];
    p.k_stride[i] = k.strides[i];
    p.v_stride[i] = v.strides[i];
    p.o_stride[i] = out.strides[i];
  }
  p.batch = int(problem.batch);
  p.heads_q = int(problem.heads_q);
  p.heads_kv = int(problem.heads_kv);
  p.seq_q = int(problem.seq_q);
  p.seq_k = int(problem.seq_k);
  p.group = int(problem.heads_q / problem.heads_kv);
  p.scale_log2 = float(double(problem.scale) * 1.4426950408889634);
  p.causal_offset = problem.causal_offset;
  return p;
}

std::size_t hash_value(const AttnProblem& problem) {
  std::size_t h = 0;
  std::apply(
      [&](const auto&... field) {
        ((h = h * 1000003u ^ std::hash<std::decay_t<decltype(field)>>()(field)), ...);
      },
      problem.fields());
  return h;
}

AttnSpec spec_of(const AttnProblem& problem) { return {problem.dtype, int(problem.head_dim), problem.causal}; }

const char* kernel_dtype_name(DType dtype) { return dtype == DType::f16 ? "f16" : "bf16"; }

void to_json(Json& j, const AttnSpec& spec) {
  j = Json{{"dtype", kernel_dtype_name(spec.dtype)}, {"d", spec.head_dim}, {"causal", spec.causal}};
  if (spec.paged) j["paged"] = true;
  if (spec.block_m != 0) j["bm"] = spec.block_m;
}

void from_json(const Json& j, AttnSpec& spec) {
  const std::string dtype = j.at("dtype");
  if (dtype != "f16" && dtype != "bf16") throw Error(ErrorCode::Internal, fmt::format("unknown spec dtype '{}'", dtype));
  spec.dtype = dtype == "f16" ? DType::f16 : DType::bf16;
  j.at("d").get_to(spec.head_dim);
  j.at("causal").get_to(spec.causal);
  spec.paged = j.value("paged", false);
  spec.block_m = j.value("bm", 0);
}

Json attention_bucket(const AttnProblem& problem) {
  auto round_up = [](std::int64_t n, std::int64_t floor) {
    return std::int64_t(std::bit_ceil(std::uint64_t(std::max(n, floor))));
  };
  return {{"seq_q", round_up(problem.seq_q, 64)},
          {"seq_k", round_up(problem.seq_k, 64)},
          {"batch_heads", round_up(problem.batch * problem.heads_q, 1)}};
}

}  // namespace jit::detail
