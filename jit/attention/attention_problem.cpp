#include "jit/attention/attention_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "jit/attention/fp8_checks.h"
#include "jit/attention/view_checks.h"
#include "jit/error.h"

namespace jit::detail {
namespace {

// q, k and v's descale factors: exactly when they are e4m3, over p.batch
// sequences and p.heads_kv KV heads.
void check_attention_descales(const AttnProblem& p, const Fp8Descale& d) {
  check_descales(p, {{{"options.descale.q", d.q}, {"options.descale.k", d.k}, {"options.descale.v", d.v}},
                     d.strides,
                     "options.descale.strides",
                     p.fp8_qkv,
                     "q",
                     "options.descale.strides = {0, 0}",
                     -1});
}

}  // namespace

AttnProblem validate_attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                               const AttentionOptions& options) {
  check_view("q", q);
  check_view("k", k);
  check_view("v", v);
  check_view("out", out);
  const bool fp8 = q.dtype == DType::e4m3;
  if (fp8 ? k.dtype != q.dtype || v.dtype != q.dtype || is_fp8(out.dtype)
          : k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype || is_fp8(q.dtype)) {
    const bool fp8_cache = !is_fp8(q.dtype) && is_fp8(k.dtype) && k.dtype == v.dtype;
    invalid(fmt::format("q, k, v and out must share one dtype (f16 or bf16), or q, k and v be e4m3 (FP8) with out "
                        "f16 or bf16; got q {}, k {}, v {}, out {}{}",
                        to_string(q.dtype), to_string(k.dtype), to_string(v.dtype), to_string(out.dtype),
                        fp8_cache ? fmt::format(". An {} K/V cache with 16-bit q is jit::attention_with_kvcache's "
                                                "(jit/serving.h)",
                                                to_string(k.dtype))
                        : q.dtype == DType::e5m2 ? ". e5m2 is taken for KV caches (jit/serving.h), not for q"
                                                 : ""));
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
  p.dtype = out.dtype;
  p.fp8_qkv = fp8;
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
  check_attention_descales(p, options.descale);
  return p;
}

void check_prefix_sum_pointers(const VarlenBatch& batch) {
  auto check = [&](const char* name, const std::int32_t* cu) {
    if (batch.batch > 0 && cu == nullptr) {
      invalid(fmt::format("{} must point to {} int32 prefix sums (batch + 1) on the device; it is null", name,
                          batch.batch + 1));
    }
    if (reinterpret_cast<std::uintptr_t>(cu) % alignof(std::int32_t) != 0) {
      invalid(fmt::format("{} must be 4-byte aligned (int32)", name));
    }
  };
  check("batch.cu_seqlens_q", batch.cu_seqlens_q);
  check("batch.cu_seqlens_k", batch.cu_seqlens_k);
}

AttnProblem validate_attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const VarlenBatch& batch,
                                      const AttentionOptions& options) {
  if (q.shape[0] != 1 || k.shape[0] != 1 || v.shape[0] != 1 || out.shape[0] != 1) {
    invalid(fmt::format("a ragged batch is packed into rows: q, k, v and out must have batch 1 ([1, H, total, D]; "
                        "packed [total, H, D] storage is TensorView::bshd(data, dtype, 1, total, H, D)); got q {}, "
                        "k {}, v {}, out {}",
                        shape_text(q), shape_text(k), shape_text(v), shape_text(out)));
  }
  AttnProblem p = validate_attention(q, k, v, out, options);
  if (batch.batch < 0) invalid(fmt::format("batch.batch must not be negative, got {}", batch.batch));
  constexpr std::int64_t kMaxRows = std::numeric_limits<std::int32_t>::max() / 2;
  if (batch.batch > kMaxRows) invalid(fmt::format("batch.batch ({}) must be at most {}", batch.batch, kMaxRows));
  check_prefix_sum_pointers(batch);
  auto check_max = [&](const char* name, std::int64_t max, const char* tensor, std::int64_t rows) {
    if (max < 0 || max > rows) {
      invalid(fmt::format("{} ({}) must be from 0 to {}'s packed rows ({}): no sequence is longer than the batch",
                          name, max, tensor, rows));
    }
  };
  check_max("batch.max_seqlen_q", batch.max_seqlen_q, "q", p.seq_q);
  check_max("batch.max_seqlen_k", batch.max_seqlen_k, "k", p.seq_k);
  p.varlen = true;
  p.total_q = p.seq_q;
  p.total_k = p.seq_k;
  p.batch = batch.batch;
  // FP8: the descale factors are per sequence, [batch.batch, Hkv] (the
  // check above saw the packed tensors' batch of 1).
  check_attention_descales(p, options.descale);
  p.seq_q = batch.max_seqlen_q;
  p.seq_k = batch.max_seqlen_k;
  p.align_bottom_right = options.causal && options.align == CausalAlign::BottomRight;
  p.causal_offset = 0;
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
  // A ragged batch is one batch of packed rows to the kernels.
  p.batch = problem.varlen ? 1 : int(problem.batch);
  p.heads_q = int(problem.heads_q);
  p.heads_kv = int(problem.heads_kv);
  p.seq_q = int(problem.varlen ? problem.total_q : problem.seq_q);
  p.seq_k = int(problem.varlen ? problem.total_k : problem.seq_k);
  p.group = int(problem.group());
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

AttnSpec spec_of(const AttnProblem& problem) {
  AttnSpec spec{problem.dtype, int(problem.head_dim), problem.causal};
  spec.varlen = problem.varlen;
  spec.fp8_kv = problem.fp8_kv;
  spec.fp8_qkv = problem.fp8_qkv;
  spec.fp8_format = problem.fp8_format;
  return spec;
}

const char* kernel_dtype_name(DType dtype) { return to_string(dtype); }

void to_json(Json& j, const AttnSpec& spec) {
  j = Json{{"dtype", kernel_dtype_name(spec.dtype)}, {"d", spec.head_dim}, {"causal", spec.causal}};
  if (spec.paged) j["paged"] = true;
  if (spec.block_m != 0) j["bm"] = spec.block_m;
  if (spec.fp8_kv) j["kv"] = kernel_dtype_name(spec.fp8_format);
  if (spec.fp8_qkv) j["qkv"] = kernel_dtype_name(spec.fp8_format);
  if (spec.varlen) j["varlen"] = true;
  if (spec.paired_kv_heads) j["kv_heads"] = 2;
  if (spec.page_descale) j["kv_scale"] = "page";
  if (spec.page_size != 0) j["page"] = spec.page_size;
  if (spec.kv_cache) j["cache"] = true;
}

void from_json(const Json& j, AttnSpec& spec) {
  const std::string dtype = j.at("dtype");
  if (dtype != "f16" && dtype != "bf16") throw Error(ErrorCode::Internal, fmt::format("unknown spec dtype '{}'", dtype));
  spec.dtype = dtype == "f16" ? DType::f16 : DType::bf16;
  j.at("d").get_to(spec.head_dim);
  j.at("causal").get_to(spec.causal);
  spec.paged = j.value("paged", false);
  spec.block_m = j.value("bm", 0);
  const std::string kv = j.value("kv", "");
  if (!kv.empty() && kv != "e4m3" && kv != "e5m2") {
    throw Error(ErrorCode::Internal, fmt::format("unknown spec kv dtype '{}'", kv));
  }
  spec.fp8_kv = !kv.empty();
  const std::string qkv = j.value("qkv", "");
  if (!qkv.empty() && qkv != "e4m3") throw Error(ErrorCode::Internal, fmt::format("unknown spec qkv dtype '{}'", qkv));
  spec.fp8_qkv = !qkv.empty();
  if (spec.fp8_kv && spec.fp8_qkv) throw Error(ErrorCode::Internal, "a spec has both \"kv\" and \"qkv\"");
  spec.fp8_format = kv == "e5m2" ? DType::e5m2 : DType::e4m3;
  spec.varlen = j.value("varlen", false);
  const int kv_heads = j.value("kv_heads", 1);
  if (kv_heads != 1 && kv_heads != 2) throw Error(ErrorCode::Internal, fmt::format("spec kv_heads is {}", kv_heads));
  spec.paired_kv_heads = kv_heads == 2;
  const std::string kv_scale = j.value("kv_scale", "");
  if (!kv_scale.empty() && kv_scale != "page") {
    throw Error(ErrorCode::Internal, fmt::format("unknown spec kv_scale '{}'", kv_scale));
  }
  spec.page_descale = kv_scale == "page";
  spec.page_size = j.value("page", 0);
  if (spec.page_size < 0) throw Error(ErrorCode::Internal, fmt::format("spec page is {}", spec.page_size));
  spec.kv_cache = j.value("cache", false);
}

Json attention_bucket(const AttnProblem& problem) {
  auto round_up = [](std::int64_t n, std::int64_t floor) {
    return std::int64_t(std::bit_ceil(std::uint64_t(std::max(n, floor))));
  };
  Json bucket = {{"seq_q", round_up(problem.seq_q, 64)},
                 {"seq_k", round_up(problem.seq_k, 64)},
                 {"batch_heads", round_up(problem.batch * problem.heads_q, 1)}};
  // A ragged batch's work is its packed rows, not batch x longest.
  if (problem.varlen) bucket["total_q"] = round_up(problem.total_q, 64);
  return bucket;
}

}  // namespace jit::detail
