#include "jit/attention/fp8_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "jit/attention/decode/decode_family.h"
#include "jit/attention/view_checks.h"
#include "jit/error.h"

namespace jit::detail {

void check_descales(const AttnProblem& p, const DescaleArgs& args) {
  for (const auto& [name, ptr] : args.factors) {
    if (!args.fp8 && ptr != nullptr) {
      invalid(fmt::format("{} is set but {} is {}: descale factors are for FP8 data", name, args.data_name,
                          to_string(p.dtype)));
    }
    if (args.fp8 && ptr == nullptr && !p.empty()) {
      invalid(fmt::format("{} is null: FP8 data needs its descale factors (float32 [{}, Hkv] on the device, "
                          "or one for all with {})",
                          name, args.pages >= 0 ? "num_pages" : "B", args.layout_hint));
    }
    if (reinterpret_cast<std::uintptr_t>(ptr) % alignof(float) != 0) {
      invalid(fmt::format("{} must be 4-byte aligned (float32); its address is {}", name,
                          static_cast<const void*>(ptr)));
    }
  }
  if (args.strides && !args.fp8) {
    invalid(fmt::format("{} is set but {} is not FP8: descale factors are for FP8 data", args.strides_name,
                        args.data_name));
  }
  const auto [outer_stride, head_stride] = descale_strides_or_default(p, args.strides);
  if (outer_stride < 0 || head_stride < 0) {
    invalid(fmt::format("{} are {{{}, {}}}; they must not be negative", args.strides_name, outer_stride,
                        head_stride));
  }
  const std::int64_t outer = args.pages >= 0 ? args.pages : p.batch;
  std::int64_t last = 0, head_part = 0;
  if (__builtin_mul_overflow(std::max<std::int64_t>(outer - 1, 0), outer_stride, &last) ||
      __builtin_mul_overflow(std::max<std::int64_t>(p.heads_kv - 1, 0), head_stride, &head_part) ||
      __builtin_add_overflow(last, head_part, &last) || last > std::numeric_limits<std::int64_t>::max() / 4) {
    invalid(fmt::format("{} {{{}, {}}} over {} {} and {} KV heads reach past a 64-bit offset", args.strides_name,
                        outer_stride, head_stride, outer, args.pages >= 0 ? "pages" : "sequences", p.heads_kv));
  }
}

void check_fp8_target(const AttnProblem& problem, const Target& target) {
  if (!problem.fp8_kv && !problem.fp8_qkv) return;
  const bool old_target = target.cc < 89 && fp8_needs_sm89(problem.fp8_format);
  // FP8 attention at D = 256 has only the sm90 family's kernel; an FP8
  // cache, the head dims the decode family serves.
  const bool sm90_head_dim = problem.fp8_qkv && problem.head_dim == 256 && target.arch == "sm_90a";
  const bool head_dim_served = problem.fp8_kv ? decode_serves_head_dim(problem, target)
                                              : problem.head_dim == 64 || problem.head_dim == 128 || sm90_head_dim;
  if (!old_target && head_dim_served) return;  // every FP8 call passes here: no message is made

  const std::string what = problem.fp8_kv ? fmt::format("an FP8 ({}) KV cache", to_string(problem.fp8_format))
                                          : std::string("FP8 (e4m3) attention");
  const char* instead = problem.fp8_kv ? "use an f16 or bf16 cache" : "use f16 or bf16 q, k and v";
  if (old_target) {
    throw Error(ErrorCode::Unsupported,
                fmt::format("{} needs sm_89 or newer (FP8 conversions and tensor cores), not {}: {}", what,
                            target.arch, instead));
  }
  const std::string more = problem.fp8_qkv ? std::string(" (or 256 on sm_90a)")
                                           : fmt::format(" (or 256 with at most {} query rows per KV head)",
                                                         kDecodeNarrowHeadDim256Rows);
  const std::string rows_here = problem.fp8_kv && problem.head_dim == 256
                                    ? fmt::format(" with {} query rows per KV head", decode_packed_rows(problem))
                                    : std::string();
  throw Error(ErrorCode::Unsupported, fmt::format("{} takes head dim 64 or 128{}, not {}{}: {}", what, more,
                                                  problem.head_dim, rows_here, instead));
}

}  // namespace jit::detail
