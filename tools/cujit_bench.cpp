// cujit-bench: times jit::attention on the PERFORMANCE.md grid (the same
// shapes as bench/peers.py), printing time, TFLOP/s and the chosen variant,
// and writing CSV rows that bench/compare.py joins with the peers' CSV.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "jit/cujit.h"
#include "jit/timing.h"
#include "jit/warmup.h"

namespace {

struct BenchShape {
  std::string tag;
  jit::AttentionShape shape;
};

std::vector<BenchShape> grid(bool quick) {
  using jit::DType;
  std::vector<BenchShape> shapes = {{"seed001", {1, 16, 1024, 64, DType::f16, false}},
                                    {"seed003", {2, 8, 256, 64, DType::f16, false}},
                                    {"seed002", {32, 8, 128, 64, DType::f16, false}},
                                    {"seed002", {8, 8, 512, 64, DType::f16, false}}};
  const std::vector<std::int64_t> seqs =
      quick ? std::vector<std::int64_t>{1024, 4096, 16384} : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192, 16384};
  for (std::int64_t d : {64, 128})
    for (std::int64_t s : seqs)
      for (bool causal : {false, true}) shapes.push_back({"grid", {16384 / s, 2048 / d, s, d, DType::f16, causal}});
  shapes.push_back({"grid-bf16", {4, 16, 4096, 128, DType::bf16, false}});
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cujit-bench: jit::attention time and TFLOP/s on the standard grid"};
  bool quick = false;
  std::string csv_path = "cujit.csv";
  std::vector<std::string> shape_texts;
  app.add_flag("--quick", quick, "fewer sequence lengths");
  app.add_option("--csv", csv_path, "CSV output")->capture_default_str();
  app.add_option("--shape", shape_texts, "B,H,S,D,dtype,causal instead of the grid (repeatable)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!jit::gpu_present()) {
      std::cerr << "cujit-bench: no GPU here; run it on a GPU machine\n";
      return 2;
    }
    std::vector<BenchShape> shapes;
    for (const auto& text : shape_texts) shapes.push_back({"custom", jit::parse_attention_shape(text)});
    if (shapes.empty()) shapes = grid(quick);
    const jit::Target target = jit::current_target();
    fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
    fmt::print("{:10} {:>3} {:>3} {:>6} {:>4} {:>2} {:>5} | {:>10} {:>7} {:>10} | {}\n", "tag", "B", "H", "S", "D", "c",
               "dt", "us", "TFLOP/s", "first(ms)", "variant");
    std::ofstream csv(csv_path);
    csv << "tag,B,H,S,D,causal,dtype,impl,us,tflops,first_call_ms,variant\n";
    for (const auto& [tag, s] : shapes) {
      jit::DeviceTensor q = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 11);
      jit::DeviceTensor k = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 12);
      jit::DeviceTensor v = jit::random_tensor(s.dtype, s.batch, s.heads, s.seq, s.head_dim, 13);
      jit::DeviceBuffer out_buffer(q.buffer.size());
      const jit::TensorView out = jit::TensorView::bhsd(out_buffer.data(), s.dtype, s.batch, s.heads, s.seq, s.head_dim);
      jit::AttentionOptions options;
      options.causal = s.causal;
      // First call: compile (or load) and tune, as a user's first call would.
      const auto start = std::chrono::steady_clock::now();
      const jit::AttentionPlan plan = jit::plan_attention(q.view, k.view, v.view, out, options);
      jit::attention(q.view, k.view, v.view, out, options);
      jit::synchronize(nullptr);
      const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      jit::TimingOptions timing;
      timing.warmup = 5;
      timing.min_reps = 20;
      timing.max_reps = 200;
      timing.target_ms = 100;
      timing.flush_l2 = true;  // as triton.testing.do_bench in peers.py
      const jit::Timing t = jit::time_on_stream([&] { jit::attention(q.view, k.view, v.view, out, options); }, nullptr, timing);
      const double flops = 4.0 * s.batch * s.heads * double(s.seq) * double(s.seq) * s.head_dim / (s.causal ? 2 : 1);
      const double tflops = flops / (t.median_us * 1e-6) / 1e12;
      const char* dtype = s.dtype == jit::DType::f16 ? "float16" : "bfloat16";
      fmt::print("{:10} {:3} {:3} {:6} {:4} {:2} {:>5} | {:10.1f} {:7.0f} {:10.0f} | {}\n", tag, s.batch, s.heads, s.seq,
                 s.head_dim, int(s.causal), jit::to_string(s.dtype), t.median_us, tflops, first_ms, plan.variant);
      std::fflush(stdout);
      csv << fmt::format("{},{},{},{},{},{},{},cujit,{:.3f},{:.2f},{:.1f},{}\n", tag, s.batch, s.heads, s.seq, s.head_dim,
                         s.causal ? "True" : "False", dtype, t.median_us, tflops, first_ms, plan.variant);
    }
    const jit::Stats st = jit::stats();
    fmt::print("nvrtc compiles {}, disk cache hits {}, tuning runs {}, tuning DB hits {}\n", st.nvrtc_compiles,
               st.disk_cache_hits, st.tuning_runs, st.tuning_db_hits);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
