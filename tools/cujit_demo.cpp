// cujit-demo: the Quick start's main job. On a GPU: runs jit::attention on a
// default shape twice (the first call compiles and tunes, the second reuses)
// and prints time, TFLOP/s, the chosen config and where the cache is. With no
// GPU: warms the cache offline for --arch (sm_90a and sm_89 by default) and
// says so.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "jit/cujit.h"
#include "jit/timing.h"
#include "jit/knobs.h"
#include "jit/warmup.h"
#include "tools/arch_list.h"
#include "tools/tool_message.h"
#include "tools/warmup_progress.h"

int main(int argc, char** argv) {
  CLI::App app{"cujit-demo: run (or, with no GPU, pre-compile) jit::attention on a default shape"};
  std::string shape_text = "4,16,2048,128,fp16,0";
  std::string archs_text = "sm_90a,sm_89";
  app.add_option("--shape", shape_text, "B,H,S,D,dtype,causal")->capture_default_str();
  app.add_option("--arch", archs_text, "with no GPU: the comma-separated archs to warm the cache for (H100: sm_90a)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const jit::AttentionShape s = jit::parse_attention_shape(shape_text);
    if (!jit::gpu_present()) {
      const std::vector<std::string> archs = split_archs(archs_text);
      if (archs.empty()) {
        fmt::print(stderr, "cujit-demo: --arch '{}' names no arch; give e.g. --arch sm_90a\n", archs_text);
        return 2;
      }
      fmt::print("No GPU here, so nothing can run; warming the cache offline for {} instead, since NVRTC needs no "
                 "GPU.\n",
                 fmt::join(archs, " and "));
      std::fflush(stdout);
      jit::WarmupSummary summary;
      try {
        summary = jit::warm_up_attention(archs, {s}, jit::detail::usable_cpus(), warmup_progress("cujit-demo"));
      } catch (const jit::Error& e) {
        if (e.code() != jit::ErrorCode::Unsupported) throw;
        // D=256 is served on sm_90a only: the default list includes sm_89.
        fmt::print(stderr, "{}\ncujit-demo: choose the archs to warm for with --arch (e.g. --arch sm_90a)\n",
                   tool_message("cujit-demo", e));
        return 1;
      }
      fmt::print("Compiled {} variants ({} were already cached, {} failed) of attention {} for {} in {:.1f} s.\n"
                 "Cache: {}\nOn a GPU of those archs sharing this cache, the first call only tunes.\n",
                 summary.compiled, summary.cached, summary.failed, shape_text, fmt::join(archs, " and "),
                 summary.seconds, jit::cache_directory());
      for (const auto& e : summary.errors) fmt::print(stderr, "  {}\n", e);
      return summary.failed == 0 ? 0 : 1;
    }
    jit::DeviceTensor q = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 1);
    jit::DeviceTensor k = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 2);
    jit::DeviceTensor v = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 3);
    jit::AttentionOptions options;
    options.causal = s.causal;
    const double flops = 4.0 * s.batch * s.heads * double(s.seq) * double(s.seq) * s.head_dim / (s.causal ? 2 : 1);
    auto timed_call = [&] {
      const auto start = std::chrono::steady_clock::now();
      jit::DeviceTensor o = jit::attention(q.view, k.view, v.view, options);
      jit::synchronize(nullptr);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    const double first_ms = timed_call();
    const jit::Stats after_first = jit::stats();
    const double second_ms = timed_call();
    jit::DeviceBuffer out_buffer(q.buffer.size());
    const jit::TensorView out = jit::TensorView::bhsd(out_buffer.data(), s.dtype, s.batch, s.heads, s.seq, s.head_dim);
    const jit::AttentionPlan plan = jit::plan_attention(q.view, k.view, v.view, out, options);
    const jit::Timing t = jit::time_on_stream([&] { jit::attention(q.view, k.view, v.view, out, options); }, nullptr);
    const jit::Target target = jit::current_target();
    fmt::print("device      {} ({})\n", target.device_name, target.arch);
    fmt::print("problem     B={} H={} S={} D={} {} causal={}\n", s.batch, s.heads, s.seq, s.head_dim,
               jit::to_string(s.dtype), s.causal);
    fmt::print("first call  {:.1f} ms ({} NVRTC compiles, {} cache hits, {} tuning runs)\n", first_ms,
               after_first.nvrtc_compiles, after_first.disk_cache_hits, after_first.tuning_runs);
    fmt::print("second call {:.3f} ms (reused the tuned kernel)\n", second_ms);
    fmt::print("kernel      {:.1f} us, {:.0f} TFLOP/s (median of {} runs)\n", t.median_us,
               flops / (t.median_us * 1e-6) / 1e12, t.reps);
    fmt::print("config      {} {}\n", plan.variant, plan.config.dump());
    fmt::print("cache       {}\n", jit::cache_directory());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << tool_message("cujit-demo", e) << "\n";
    return 1;
  }
}
