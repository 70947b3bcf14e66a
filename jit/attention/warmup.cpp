#include "jit/warmup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdint>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>

#include "autotune/prune.h"
#include "autotune/tuner.h"
#include "cache/bounded_json.h"
#include "jit/attention.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/warmup_shapes.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/log.h"

namespace jit {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

DType parse_dtype(const std::string& text) {
  if (text == "fp16" || text == "f16" || text == "float16") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
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

std::vector<AttentionShape> parse_attention_manifest(const std::string& json_text) {
  const Json manifest = cache::parse_bounded_json(json_text, cache::kWarmupManifestLimits).value_or(nullptr);
  if (!manifest.is_object() || !manifest.contains("shapes") || !manifest["shapes"].is_array()) {
    invalid("the manifest must be a JSON object with a \"shapes\" array");
  }
  std::vector<AttentionShape> shapes;
  for (const Json& entry : manifest["shapes"]) {
    try {
      if (!entry.is_object()) invalid(fmt::format("manifest entry {} is not an object", entry.dump()));
      // Sizes must be JSON integers: converting a float such as 1e19 or 1.5
      // would be undefined or silently truncate.
      auto size_field = [&](const char* name, std::optional<std::int64_t> fallback) -> std::int64_t {
        const auto it = entry.find(name);
        if (it == entry.end()) {
          if (!fallback) invalid(fmt::format("manifest entry {} has no \"{}\"", entry.dump(), name));
          return *fallback;
        }
        if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
          invalid(fmt::format("manifest entry {}: \"{}\" is too large", entry.dump(), name));
        }
        if (!it->is_number_integer()) {
          invalid(fmt::format("manifest entry {}: \"{}\" must be an integer", entry.dump(), name));
        }
        return it->get<std::int64_t>();
      };
      AttentionShape s;
      s.batch = size_field("batch", 1);
      s.heads = size_field("heads", 16);
      s.seq = size_field("seq", std::nullopt);
      s.head_dim = size_field("head_dim", std::nullopt);
      s.dtype = parse_dtype(entry.value("dtype", std::string("fp16")));
      s.causal = entry.value("causal", false);
      if (s.batch <= 0 || s.heads <= 0 || s.seq <= 0 || s.head_dim <= 0) invalid("sizes must be positive");
      shapes.push_back(s);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      invalid(fmt::format("manifest entry {} is not a shape: {}", entry.dump(), e.what()));
    }
  }
  return shapes;
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
      const detail::AttentionFamily& family = detail::attention_family_for(problem, target);
      const Json spec = detail::spec_of(problem);
      for (const Json& config : autotune::prune_space(family, spec, target).kept) {
        if (seen.insert(arch + '/' + family.variant_name(spec, config)).second) {
          jobs.push_back({&family, spec, config, arch});
        }
      }
    }
  }
  detail::log_info("warm-up: {} variants for {} to compile or find in the cache", jobs.size(), fmt::join(archs, ", "));
  WarmupSummary summary;
  std::mutex mutex;
  std::size_t done = 0;
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
      summary.errors.push_back(fmt::format("{} for {}: {}", report.variant, job.arch, error));
    } else if (report.from_cache) {
      ++summary.cached;
    } else {
      ++summary.compiled;
    }
    ++done;
    if (progress) progress(report, done, jobs.size());
  });
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

void tune_attention_shapes(const std::vector<AttentionShape>& shapes, WarmupSummary& summary) {
  for (const AttentionShape& s : shapes) {
    const auto start = std::chrono::steady_clock::now();
    DeviceTensor q = random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 1);
    DeviceTensor k = random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 2);
    DeviceTensor v = random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 3);
    DeviceBuffer out_buffer(q.buffer.size());
    const TensorView out = TensorView::bhsd(out_buffer.data(), s.dtype, s.batch, s.heads, s.seq, s.head_dim);
    AttentionOptions options;
    options.causal = s.causal;
    plan_attention(q.view, k.view, v.view, out, options);
    CUJIT_CU_CHECK(detail::driver().cuCtxSynchronize());
    ++summary.tuned;
    summary.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
}

}  // namespace jit
