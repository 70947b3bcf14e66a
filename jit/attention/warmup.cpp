#include "jit/warmup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>

#include "autotune/prune.h"
#include "autotune/tuner.h"
#include "cache/bounded_json.h"
#include "jit/attention.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/fp8_checks.h"
#include "jit/attention/kv_validation.h"
#include "jit/attention/warmup_shapes.h"
#include "jit/binary_cache.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/log.h"
#include "jit/runtime_state.h"
#include "jit/serving.h"
#include "jit/varlen.h"

namespace jit {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

std::optional<DType> dtype_named(const std::string& text) {
  if (text == "fp16" || text == "f16" || text == "float16") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  return std::nullopt;
}

DType parse_dtype(const std::string& text) {
  if (const std::optional<DType> dtype = dtype_named(text)) return *dtype;
  invalid(fmt::format("dtype '{}' is not fp16 or bf16", text));
}

}  // namespace

AttentionShape parse_attention_shape(const std::string& text) {
  std::vector<std::string> fields(1);
  for (char c : text) {
    if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (fields.size() != 6) invalid(fmt::format("shape '{}' must be B,H,S,D,dtype,causal (e.g. 1,16,1024,64,fp16,0)", text));
  auto integer = [&](const std::string& field) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (error == std::errc::result_out_of_range && end == field.data() + field.size()) {
      invalid(fmt::format("shape '{}': '{}' is out of range (B, H, S and D must fit in 64 bits)", text, field));
    }
    if (field.empty() || error != std::errc() || end != field.data() + field.size()) {
      invalid(fmt::format("shape '{}': '{}' is not an integer (B, H, S and D must be integers)", text, field));
    }
    return value;
  };
  AttentionShape s;
  s.batch = integer(fields[0]);
  s.heads = integer(fields[1]);
  s.seq = integer(fields[2]);
  s.head_dim = integer(fields[3]);
  if (s.batch <= 0 || s.heads <= 0 || s.seq <= 0 || s.head_dim <= 0) {
    invalid(fmt::format("shape '{}': B, H, S and D must be positive", text));
  }
  s.dtype = parse_dtype(fields[4]);
  if (fields[5] != "0" && fields[5] != "1") invalid(fmt::format("shape '{}': causal must be 0 or 1", text));
  s.causal = fields[5] == "1";
  return s;
}

namespace {

// `name` opens every message: "the manifest", or "manifest PATH" for a file.
std::vector<AttentionShape> parse_manifest(const std::string& json_text, const std::string& name) {
  if (json_text.find_first_not_of(" \t\r\n") == std::string::npos) {
    invalid(fmt::format("{} is empty; it must be a JSON object with a \"shapes\" array", name));
  }
  // Size and depth first: a hostile document must neither exhaust memory nor
  // overflow the stack of the recursive walkers below.
  const cache::JsonLimits& limits = cache::kWarmupManifestLimits;
  if (json_text.size() > limits.max_bytes) {
    invalid(fmt::format("{} is {} bytes, more than the {} accepted", name, json_text.size(), limits.max_bytes));
  }
  if (const auto at = cache::first_byte_deeper_than(json_text, limits.max_depth)) {
    invalid(fmt::format("{} nests deeper than {} levels (byte {})", name, limits.max_depth, *at + 1));
  }
  // nlohmann's text starts with "[json.exception.<kind>.N] "; the rest says where and what.
  auto parser_text = [](const Json::exception& e) {
    std::string what = e.what();
    if (const auto bracket = what.find("] "); what.rfind("[json.", 0) == 0 && bracket != std::string::npos) {
      what.erase(0, bracket + 2);
    }
    return what;
  };
  Json manifest;
  try {
    manifest = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    invalid(fmt::format("{} is not valid JSON (byte {}): {}", name, e.byte, parser_text(e)));
  } catch (const Json::exception& e) {
    // Not a syntax error but still the parser's: a number past a double's range.
    invalid(fmt::format("{} is not valid JSON: {}", name, parser_text(e)));
  }
  if (!manifest.is_object() || !manifest.contains("shapes") || !manifest["shapes"].is_array()) {
    invalid(fmt::format("{} must be a JSON object with a \"shapes\" array, e.g. "
                        "{{\"shapes\": [{{\"seq\": 1024, \"head_dim\": 64}}]}}; it is {}",
                        name, manifest.is_object() ? "an object without one" : std::string("a JSON ") + manifest.type_name()));
  }
  for (const auto& [key, value] : manifest.items()) {
    if (key != "shapes") invalid(fmt::format("{} has an unknown key \"{}\" (only \"shapes\")", name, key));
  }
  static const std::set<std::string> known = {"batch",    "heads",     "seq",      "head_dim",
                                              "dtype",    "causal",    "varlen",   "kv_cache",
                                              "new_rows", "heads_kv",  "page_size", "kv_dtype",
                                              "qkv_dtype", "head_major", "descale_per_page"};
  // Read only for a KV-cache shape, so refused without "kv_cache": true.
  static const char* const kv_keys[] = {"new_rows", "heads_kv", "page_size", "kv_dtype", "head_major",
                                        "descale_per_page"};
  std::vector<AttentionShape> shapes;
  std::size_t index = 0;
  for (const Json& entry : manifest["shapes"]) {
    const std::string where = fmt::format("{} entry {} ({})", name, index++, entry.dump());
    if (!entry.is_object()) invalid(fmt::format("{} is not an object", where));
    for (const auto& [key, value] : entry.items()) {
      if (!known.count(key)) {
        invalid(fmt::format("{}: unknown key \"{}\" (the keys are {})", where, key,
                            "batch, heads, seq, head_dim, dtype, causal, varlen, kv_cache, new_rows, heads_kv, "
                            "page_size, kv_dtype, head_major, descale_per_page, qkv_dtype"));
      }
    }
    // Sizes must be JSON integers: converting a float such as 1e19 or 1.5
    // would be undefined or silently truncate.
    auto size_field = [&](const char* name, std::optional<std::int64_t> fallback,
                          std::int64_t least = 1) -> std::int64_t {
      const auto it = entry.find(name);
      if (it == entry.end()) {
        if (!fallback) invalid(fmt::format("{} has no \"{}\"", where, name));
        return *fallback;
      }
      if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
        invalid(fmt::format("{}: \"{}\" is out of range", where, name));
      }
      if (!it->is_number_integer()) invalid(fmt::format("{}: \"{}\" must be an integer", where, name));
      const std::int64_t value = it->get<std::int64_t>();
      if (value < least) {
        invalid(fmt::format("{}: \"{}\" must be {}", where, name, least == 0 ? "0 or more" : "positive"));
      }
      return value;
    };
    AttentionShape s;
    s.batch = size_field("batch", 1);
    s.heads = size_field("heads", 16);
    s.seq = size_field("seq", std::nullopt);
    s.head_dim = size_field("head_dim", std::nullopt);
    if (const auto it = entry.find("dtype"); it != entry.end()) {
      if (!it->is_string()) invalid(fmt::format("{}: \"dtype\" must be \"fp16\" or \"bf16\"", where));
      try {
        s.dtype = parse_dtype(it->get<std::string>());
      } catch (const Error&) {
        invalid(fmt::format("{}: \"dtype\" {} is not \"fp16\" or \"bf16\"", where, it->dump()));
      }
    }
    auto bool_field = [&](const char* name, bool fallback) {
      const auto it = entry.find(name);
      if (it == entry.end()) return fallback;
      if (!it->is_boolean()) invalid(fmt::format("{}: \"{}\" must be true or false", where, name));
      return it->get<bool>();
    };
    s.varlen = bool_field("varlen", false);
    s.kv_cache = bool_field("kv_cache", false);
    // A KV-cache plan is causal unless asked otherwise (KvAttentionOptions).
    s.causal = bool_field("causal", s.kv_cache);
    if (s.kv_cache) {
      if (s.varlen) {
        invalid(fmt::format("{}: \"kv_cache\" and \"varlen\" are both true; a shape is one or the other", where));
      }
      s.new_rows = size_field("new_rows", 1);
      s.heads_kv = size_field("heads_kv", 0);  // 0: as many as "heads"
      s.page_size = size_field("page_size", 0, 0);
      s.kv_head_major = bool_field("head_major", false);
      s.kv_descale_per_page = bool_field("descale_per_page", false);
      if (const auto it = entry.find("kv_dtype"); it != entry.end()) {
        const std::string text = it->is_string() ? it->get<std::string>() : "";
        s.fp8_kv = text == "fp8" || text == "e4m3" || text == "e5m2";
        if (text == "e5m2") s.fp8_format = DType::e5m2;
        if (!s.fp8_kv && dtype_named(text) != s.dtype) {
          invalid(fmt::format("{}: \"kv_dtype\" {} is not \"fp8\" (or \"e4m3\"), \"e5m2\" nor the entry's dtype "
                              "{}: the cache is in q's dtype or FP8",
                              where, it->dump(), to_string(s.dtype)));
        }
      }
      // What plan_kv_attention would refuse (heads not a multiple of
      // heads_kv, a page of 300 keys) is this entry's error, named here.
      try {
        detail::problem_of(s);
      } catch (const Error& e) {
        invalid(fmt::format("{}: {}", where, e.what()));
      }
    } else {
      for (const char* key : kv_keys) {
        if (entry.contains(key)) {
          invalid(fmt::format("{}: \"{}\" is for a KV-cache shape; add \"kv_cache\": true", where, key));
        }
      }
      if (const auto it = entry.find("qkv_dtype"); it != entry.end()) {
        const std::string text = it->is_string() ? it->get<std::string>() : "";
        s.fp8_qkv = text == "fp8" || text == "e4m3";
        if (!s.fp8_qkv && dtype_named(text) != s.dtype) {
          invalid(fmt::format("{}: \"qkv_dtype\" {} is not \"fp8\" (or \"e4m3\") nor the entry's dtype {}: q, k "
                              "and v are in the output's dtype or FP8",
                              where, it->dump(), to_string(s.dtype)));
        }
      }
    }
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

std::vector<AttentionShape> parse_attention_manifest(const std::string& json_text) {
  return parse_manifest(json_text, "the manifest");
}

std::vector<AttentionShape> read_attention_manifest(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) invalid(fmt::format("manifest {} is a directory, not a file", path));
  std::ifstream file(path, std::ios::binary);
  if (!file) invalid(fmt::format("cannot read manifest {}: {}", path, std::strerror(errno)));
  // One byte past the cap is enough to refuse it: /dev/zero never ends.
  std::string text(cache::kWarmupManifestLimits.max_bytes + 1, '\0');
  file.read(text.data(), std::streamsize(text.size()));
  if (file.bad()) invalid(fmt::format("cannot read manifest {}: {}", path, std::strerror(errno)));
  text.resize(std::size_t(file.gcount()));
  return parse_manifest(text, "manifest " + path);
}

std::vector<AttentionShape> all_attention_specializations(const std::string& arch) {
  return detail::attention_specializations(offline_target(arch));
}

WarmupSummary warm_up_attention(const std::vector<std::string>& archs, const std::vector<AttentionShape>& shapes,
                                unsigned threads, const WarmupProgress& progress) {
  struct Job {
    const KernelFamily* family;
    Json spec, config;
    std::string arch;
  };
  std::vector<Job> jobs;
  std::set<std::string> seen;
  for (const std::string& arch : archs) {
    const Target target = offline_target(arch);
    for (const AttentionShape& shape : shapes) {
      const detail::AttnProblem problem = detail::problem_of(shape);
      detail::check_fp8_target(problem, target);
      const detail::AttentionFamily& family = detail::attention_family_for(problem, target);
      const Json spec = family.spec_for(problem);
      for (const Json& config : autotune::prune_space(family, spec, target).kept) {
        if (seen.insert(arch + '/' + family.variant_name(spec, config)).second) {
          jobs.push_back({&family, spec, config, arch});
        }
      }
      for (const auto& companion : family.companions(spec)) {
        if (seen.insert(arch + '/' + companion.family->variant_name(companion.spec, companion.config)).second) {
          jobs.push_back({companion.family, companion.spec, companion.config, arch});
        }
      }
    }
  }
  // Once, before any compile: an untrusted directory throws Error(Cache) here
  // rather than once per variant, and with no disk cache nothing would stay.
  if (cache_directory().empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("there is no disk cache ({}), so a warm-up would compile every variant and keep none{}",
                            cache_status(), detail::no_disk_cache_fix()));
  }
  detail::log_info("warm-up: {} variants for {} to compile or find in the cache", jobs.size(), fmt::join(archs, ", "));
  WarmupSummary summary;
  std::mutex mutex;
  std::size_t done = 0;
  std::vector<char> failed(jobs.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  autotune::parallel_for(jobs.size(), threads, [&](std::size_t i) {
    const Job& job = jobs[i];
    CompileReport report;
    std::string error;
    try {
      report = compile_variant(*job.family, job.spec, job.config, job.arch);
    } catch (const std::exception& e) {
      error = e.what();
      report.variant = job.family->variant_name(job.spec, job.config);
      report.arch = job.arch;
    }
    std::lock_guard lock(mutex);
    if (!error.empty()) {
      ++summary.failed;
      failed[i] = 1;
      summary.errors.push_back(fmt::format("{} for {}: {}", report.variant, job.arch, error));
    } else if (report.from_cache) {
      ++summary.cached;
    } else {
      ++summary.compiled;
    }
    ++done;
    if (progress) progress(report, done, jobs.size());
  });
  // Each store may evict older entries (CUJIT_CACHE_MAX_BYTES), this
  // warm-up's own included: count what a later process would not find.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (failed[i]) continue;  // a failed compile left nothing to keep
    std::error_code error;
    const Job& job = jobs[i];
    if (!std::filesystem::exists(detail::cached_entry_path(*job.family, job.spec, job.config, job.arch), error)) {
      ++summary.not_kept;
    }
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

namespace {

// Tunes a dense or ragged shape: one call on random inputs (the first call
// per shape class tunes).
void tune_with_inputs(const AttentionShape& s) {
  const DType in = s.fp8_qkv ? DType::e4m3 : s.dtype;
  DeviceTensor q = random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 1);
  DeviceTensor k = random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 2);
  DeviceTensor v = random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 3);
  DeviceBuffer out_buffer(std::size_t(q.view.numel()) * element_size(s.dtype));
  const TensorView out = TensorView::bhsd(out_buffer.data(), s.dtype, s.batch, s.heads, s.seq, s.head_dim);
  AttentionOptions options;
  options.causal = s.causal;
  DeviceBuffer descale;  // FP8: one factor of 1 for all
  if (s.fp8_qkv) {
    const float one = 1.f;
    descale = DeviceBuffer(sizeof one);
    descale.upload(&one, sizeof one);
    const auto* factor = static_cast<const float*>(descale.data());
    options.descale = {factor, factor, factor, std::array<std::int64_t, 2>{0, 0}};
  }
  if (s.varlen) {
    // The same rows as one packed ragged batch of equal sequences.
    std::vector<std::int32_t> sums(std::size_t(s.batch) + 1);
    for (std::size_t b = 0; b < sums.size(); ++b) sums[b] = std::int32_t(std::int64_t(b) * s.seq);
    DeviceBuffer cu(sums.size() * sizeof(std::int32_t));
    cu.upload(sums.data(), cu.size());
    VarlenBatch batch;
    batch.cu_seqlens_q = batch.cu_seqlens_k = static_cast<const std::int32_t*>(cu.data());
    batch.batch = s.batch;
    batch.max_seqlen_q = batch.max_seqlen_k = s.seq;
    auto packed = [&](const DeviceTensor& t) {
      return TensorView::bshd(t.view.data, s.dtype, 1, s.batch * s.seq, s.heads, s.head_dim);
    };
    attention_varlen(packed(q), packed(k), packed(v),
                     TensorView::bshd(out.data, s.dtype, 1, s.batch * s.seq, s.heads, s.head_dim), batch, options);
  } else {
    plan_attention(q.view, k.view, v.view, out, options);
  }
  CUJIT_CU_CHECK(detail::driver().cuCtxSynchronize());
}

}  // namespace

void tune_attention_shapes(const std::vector<AttentionShape>& shapes, WarmupSummary& summary) {
  for (const AttentionShape& s : shapes) {
    const auto start = std::chrono::steady_clock::now();
    if (s.kv_cache) {
      // Making the plan tunes its shape class, on inputs of its own.
      plan_kv_attention(detail::kv_plan_shape_of(s), detail::kv_plan_options_of(s));
    } else {
      tune_with_inputs(s);
    }
    ++summary.tuned;
    summary.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
}

}  // namespace jit
