// The decode shapes cujit-serving-bench times (issue 19's table and its
// performance bar, plus common serving shapes), and what a row's bar counts.
#pragma once
#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/error.h"
#include "jit/tensor.h"
#include "tools/comma_fields.h"

namespace serving_bench {

struct DecodeShape {
  std::int64_t batch, heads_q, heads_kv, seq_k, head_dim;
  jit::DType dtype;        ///< q's and out's
  std::optional<jit::DType> fp8_kv{};  ///< the cache's FP8 format (e4m3 or e5m2); else the cache is in dtype
  bool operator==(const DecodeShape&) const = default;
};

inline jit::DType kv_dtype(const DecodeShape& s) { return s.fp8_kv.value_or(s.dtype); }

/// K + V bytes one decode call reads: each byte once.
inline double kv_bytes(const DecodeShape& s) {
  return 2.0 * double(s.batch) * double(s.heads_kv) * double(s.seq_k) * double(s.head_dim) *
         double(jit::element_size(kv_dtype(s)));
}

/// Rows with at least this much K + V carry the bandwidth bar (issue 19: "at least 64 MB").
constexpr double kBarBytes = 64e6;

inline std::string label(const DecodeShape& s) {
  return fmt::format("B={} Hq={} Hkv={} Sk={} D={}{}", s.batch, s.heads_q, s.heads_kv, s.seq_k, s.head_dim,
                     !s.fp8_kv ? "" : *s.fp8_kv == jit::DType::e5m2 ? " fp8 e5m2 KV" : " fp8 KV");
}

/// The small decode whose bar is time against copy time plus the launch floor.
inline DecodeShape small_decode() { return {1, 32, 8, 4096, 128, jit::DType::f16}; }

inline std::vector<DecodeShape> decode_shapes(bool quick) {
  using jit::DType;
  if (quick) {
    return {{8, 32, 8, 8192, 128, DType::f16}, small_decode(), {4, 32, 1, 32768, 128, DType::bf16},
            {8, 32, 8, 8192, 128, DType::f16, DType::e4m3}};
  }
  return {
      {8, 32, 8, 8192, 128, DType::f16},     // GQA 4
      {64, 32, 8, 2048, 128, DType::f16},    // many short sequences
      small_decode(),                        // one sequence, 16 MiB: the launch-bound case
      {1, 64, 8, 131072, 128, DType::bf16},  // one long sequence: split-KV or nothing
      {4, 32, 1, 32768, 128, DType::bf16},   // MQA
      {16, 32, 8, 16384, 128, DType::f16},   // 1 GiB of cache
      {128, 8, 1, 2048, 128, DType::f16},    // MQA, a tensor-parallel shard of a large batch
      {32, 16, 4, 8192, 64, DType::f16},     // GQA 4 at D = 64
      {8, 16, 8, 8192, 256, DType::bf16},    // GQA 2 at D = 256 (Gemma 2's attention)
      // FP8 (e4m3) caches: half the bytes of the same shapes above.
      {8, 32, 8, 8192, 128, DType::f16, DType::e4m3},
      {64, 32, 8, 2048, 128, DType::f16, DType::e4m3},
      {1, 64, 8, 131072, 128, DType::bf16, DType::e4m3},
      {4, 32, 1, 32768, 128, DType::bf16, DType::e4m3},
      {16, 32, 8, 16384, 128, DType::f16, DType::e4m3},
      {32, 16, 4, 8192, 64, DType::f16, DType::e4m3},
      {8, 16, 8, 8192, 256, DType::bf16, DType::e4m3},
      // e5m2 caches (vLLM's fp8_e5m2): the same bytes, converted by a byte permute.
      {8, 32, 8, 8192, 128, DType::f16, DType::e5m2},
      {1, 64, 8, 131072, 128, DType::bf16, DType::e5m2},
  };
}

/// A decode shape from --shape's text, B,Hq,Hkv,Sk,D,dtype[,kv]: dtype f16
/// (fp16) or bf16, kv an FP8 cache format (e4m3, e5m2) or the dtype when left
/// out, e.g. "4,64,1,32768,128,bf16" or "8,32,8,8192,128,f16,e4m3". Throws
/// Error(InvalidArgument) naming the field.
inline DecodeShape parse_decode_shape(const std::string& text) {
  auto invalid = [&](const std::string& why) {
    return jit::Error(jit::ErrorCode::InvalidArgument,
                      fmt::format("--shape '{}': {} (B,Hq,Hkv,Sk,D,dtype[,kv], e.g. 4,64,1,32768,128,bf16 or "
                                  "8,32,8,8192,128,f16,e4m3)",
                                  text, why));
  };
  const std::vector<std::string> fields = split_fields(text);
  if (fields.size() != 6 && fields.size() != 7) throw invalid(fmt::format("{} fields, not 6 or 7", fields.size()));
  auto positive = [&](int i, const char* name) {
    std::int64_t value = 0;
    const std::string& f = fields[std::size_t(i)];
    const auto [end, error] = std::from_chars(f.data(), f.data() + f.size(), value);
    if (f.empty() || error != std::errc() || end != f.data() + f.size() || value <= 0) {
      throw invalid(fmt::format("{} '{}' is not a positive integer", name, f));
    }
    return value;
  };
  DecodeShape s{positive(0, "B"), positive(1, "Hq"), positive(2, "Hkv"), positive(3, "Sk"), positive(4, "D"),
                jit::DType::f16};
  if (s.heads_q % s.heads_kv != 0) throw invalid(fmt::format("Hq {} is not a multiple of Hkv {}", s.heads_q, s.heads_kv));
  auto sixteen_bit = [](const std::string& f) -> std::optional<jit::DType> {
    if (f == "bf16") return jit::DType::bf16;
    if (f == "f16" || f == "fp16") return jit::DType::f16;
    return std::nullopt;
  };
  const std::optional<jit::DType> dtype = sixteen_bit(fields[5]);
  if (!dtype) throw invalid(fmt::format("dtype '{}' is not f16 or bf16", fields[5]));
  s.dtype = *dtype;
  if (fields.size() == 7) {
    if (fields[6] == "e4m3") {
      s.fp8_kv = jit::DType::e4m3;
    } else if (fields[6] == "e5m2") {
      s.fp8_kv = jit::DType::e5m2;
    } else if (sixteen_bit(fields[6]) != s.dtype) {
      throw invalid(fmt::format("kv '{}' is not e4m3, e5m2 or the dtype", fields[6]));
    }
  }
  return s;
}

/// Page sizes of the paged rows and their bars (paged time / contiguous time).
struct PagedCase {
  std::int64_t page_size;
  double bar;
};
inline std::vector<PagedCase> paged_cases() { return {{16, 1.05}, {1, 1.15}}; }

/// The decode steps timed in a CUDA graph.
inline std::vector<DecodeShape> graph_shapes(bool quick) {
  if (quick) return {small_decode()};
  return {small_decode(), {8, 32, 8, 8192, 128, jit::DType::f16}};
}

}  // namespace serving_bench
