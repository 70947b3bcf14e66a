// cujit-bench: times jit::attention on the standard grid (the shapes the peer
// benchmark times, bench/run_compare.sh), printing time, TFLOP/s and the
// chosen variant, and writing CSV rows that bench/compare.py joins with the
// peers' CSV.
// --host-overhead instead measures the host time of one jit::attention call
// next to a bare launch of an empty kernel taking a parameter struct of the
// same size. --latency times small shapes next to the floor of the timing
// method: empty kernels launched and timed the same way; --latency-configs
// times every config of those shapes with and without the L2 scrub.
// --first-call measures a new shape class's first call on an empty cache
// directory, with CUJIT_AUTOTUNE=full (the call compiles and tunes) and
// =background (the call runs on the default config while tuning runs
// behind it), each in a fresh process, and the time until the tuned config
// serves (with --dtype, of that dtype's shapes).
// --dtype fp8 runs the shapes with q, k, v in e4m3 (one descale factor of 1
// per tensor, the shape's dtype out) and prints each next to the 16-bit
// kernel at the same shape.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <vector>

#include "jit/attention_inspect.h"
#include "jit/cujit.h"
#include "jit/timing.h"
#include "jit/warmup.h"
#include "tools/launch_floor.h"
#include "tools/tool_message.h"
#include "tools/unit_descale.h"

extern char** environ;

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

// Random q, k, v (fixed seeds) and an output buffer for one shape, contiguous
// [B, H, S, D]; with `fp8`, q, k, v in e4m3 with one descale factor of 1 for
// all, and out in s.dtype.
struct BenchTensors {
  jit::DeviceTensor q, k, v;
  jit::DeviceBuffer out_buffer;
  jit::TensorView out;
  std::optional<UnitDescale> fp8;  // set for e4m3 inputs
};
BenchTensors bench_tensors(const jit::AttentionShape& s, bool fp8 = false) {
  BenchTensors t;
  const jit::DType in = fp8 ? jit::DType::e4m3 : s.dtype;
  t.q = jit::random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 11);
  t.k = jit::random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 12);
  t.v = jit::random_tensor(in, s.batch, s.heads, s.seq, s.head_dim, 13);
  t.out_buffer = jit::DeviceBuffer(std::size_t(t.q.view.numel()) * jit::element_size(s.dtype));
  t.out = jit::TensorView::bhsd(t.out_buffer.data(), s.dtype, s.batch, s.heads, s.seq, s.head_dim);
  if (fp8) t.fp8.emplace();
  return t;
}

// --dtype: "as-shape" keeps each shape's dtype, "f16" / "bf16" replace it,
// "fp8" keeps it for the output and makes q, k, v e4m3.
void apply_dtype_choice(jit::AttentionShape& s, const std::string& choice) {
  if (choice == "f16" || choice == "bf16") s.dtype = choice == "f16" ? jit::DType::f16 : jit::DType::bf16;
}

struct Measured {
  jit::AttentionPlan plan;
  jit::Timing timing;
  double first_ms = 0;
};
// First call (compile or load, and tune, as a user's first call would),
// then the median of timed calls with L2 flushed between them, as the peer
// benchmark (triton.testing.do_bench) times.
Measured measure(const jit::AttentionShape& s, bool fp8) {
  const BenchTensors tensors = bench_tensors(s, fp8);
  const jit::TensorView &q = tensors.q.view, &k = tensors.k.view, &v = tensors.v.view, &out = tensors.out;
  jit::AttentionOptions options;
  options.causal = s.causal;
  if (tensors.fp8) options.descale = tensors.fp8->descales;
  Measured m;
  const auto start = std::chrono::steady_clock::now();
  m.plan = jit::plan_attention(q, k, v, out, options);
  jit::attention(q, k, v, out, options);
  jit::synchronize(nullptr);
  m.first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  jit::TimingOptions timing;
  timing.warmup = 5;
  timing.min_reps = 20;
  timing.max_reps = 200;
  timing.target_ms = 100;
  timing.flush_l2 = true;
  m.timing = jit::time_on_stream([&] { jit::attention(q, k, v, out, options); }, nullptr, timing);
  return m;
}

// ---------------------------------------------------------------------------
// Host overhead: what one jit::attention call costs the calling thread beyond
// the launch itself (argument checks, finding the kernel and config, building
// the parameters).

// Host microseconds per call of `call`: kBatches batches of kCalls calls, each
// batch timed on the host with nothing synchronizing inside it (the GPU runs
// behind; 100 pending launches are far fewer than the driver queues before a
// launch has to wait for room). The stream is drained between batches,
// outside the timing.
// Returns the median batch's time per call.
template <class Call>
double host_us_per_call(Call&& call, jit::Stream stream) {
  constexpr int kWarmupCalls = 20, kCalls = 100, kBatches = 30;
  for (int i = 0; i < kWarmupCalls; ++i) call();
  jit::synchronize(stream);
  std::vector<double> per_call;
  for (int b = 0; b < kBatches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    const auto stop = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / kCalls);
    jit::synchronize(stream);
  }
  std::nth_element(per_call.begin(), per_call.begin() + kBatches / 2, per_call.end());
  return per_call[kBatches / 2];
}

// The bare launch for kernels whose parameter struct is `launch`'s: grid of
// one block per SM (as the persistent sm90 kernel), 128 threads, no shared
// memory.
double bare_launch_us(const jit::AttentionLaunch& launch, jit::Stream stream) {
  const jit::Kernel& kernel = launch_floor::empty_kernel(launch.params_bytes, launch.params_align);
  jit::LaunchGeometry geometry;
  geometry.grid = {unsigned(std::max(1, jit::current_target().sm_count)), 1, 1};
  geometry.block = {128, 1, 1};
  const std::vector<unsigned char> params(launch.params_bytes, 0);
  return host_us_per_call([&] { kernel.launch(geometry, params.data(), params.size(), stream); }, stream);
}

int run_host_overhead(const std::string& csv_path) {
  using jit::DType;
  const std::vector<jit::AttentionShape> shapes = {{2, 8, 256, 64, DType::f16, false},
                                                   {16, 16, 1024, 128, DType::f16, true}};
  const jit::Target target = jit::current_target();
  const jit::Stream stream = nullptr;
  fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
  fmt::print("host time per call: median of 30 batches of 100 calls, no synchronization inside a batch\n");
  fmt::print("{:>3} {:>3} {:>6} {:>4} {:>2} {:>5} | {:>12} {:>11} {:>11} {:>6} | {:>11} {:>12} | {}\n", "B", "H", "S",
             "D", "c", "dt", "attention us", "bare us", "overhead us", "params", "validate us", "placement us",
             "variant");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "B,H,S,D,causal,dtype,attention_us,bare_launch_us,overhead_us,params_bytes,validate_us,placement_us,"
           "variant\n";
  }
  for (const jit::AttentionShape& s : shapes) {
    const BenchTensors tensors = bench_tensors(s);
    const jit::TensorView &q = tensors.q.view, &k = tensors.k.view, &v = tensors.v.view, &out = tensors.out;
    jit::AttentionOptions options;
    options.causal = s.causal;
    options.stream = stream;
    // First call: compile (or load) and tune, outside the measurement.
    const jit::AttentionPlan plan = jit::plan_attention(q, k, v, out, options);
    jit::attention(q, k, v, out, options);
    jit::synchronize(stream);
    const double attention_us =
        host_us_per_call([&] { jit::attention(q, k, v, out, options); }, stream);
    // The bare launch takes the parameter struct of the kernel that served the call.
    const jit::AttentionLaunch launch = jit::attention_launches(q, k, v, out, options, plan.config).front();
    const std::size_t params_bytes = launch.params_bytes;
    const double bare_us = bare_launch_us(launch, stream);
    // Two parts of the overhead on their own: argument checks (no GPU) and the
    // check that every tensor is memory of the kernel's GPU (a driver query each).
    const double validate_us =
        host_us_per_call([&] { jit::check_attention_arguments(q, k, v, out, options); }, stream);
    const double placement_us =
        host_us_per_call([&] { jit::check_attention_placement(q, k, v, out, options); }, stream);
    fmt::print("{:3} {:3} {:6} {:4} {:2} {:>5} | {:12.2f} {:11.2f} {:11.2f} {:6} | {:11.2f} {:12.2f} | {}\n", s.batch,
               s.heads, s.seq, s.head_dim, int(s.causal), jit::to_string(s.dtype), attention_us, bare_us,
               attention_us - bare_us, params_bytes, validate_us, placement_us, plan.variant);
    std::fflush(stdout);
    if (csv.is_open()) {
      csv << fmt::format("{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{},{:.3f},{:.3f},{}\n", s.batch, s.heads, s.seq,
                         s.head_dim, s.causal ? "True" : "False", jit::to_string(s.dtype), attention_us, bare_us,
                         attention_us - bare_us, params_bytes, validate_us, placement_us, plan.variant);
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Latency of small shapes: the attention call event-timed as the grid is (L2
// scrubbed before each run) and without the scrub, next to empty kernels timed
// the same way: one 128-thread CTA, and the attention launch's own grid, block
// and dynamic shared memory. The empty kernels are the floor of the method
// (event, launch, event); the rest is the kernel's own work and its loads.

// The empty kernel with `launch`'s parameter struct, launched with `geometry`.
double empty_kernel_us(const jit::AttentionLaunch& launch, const jit::LaunchGeometry& geometry,
                       const jit::TimingOptions& timing) {
  return launch_floor::empty_kernel_us(launch.params_bytes, launch.params_align, geometry, timing);
}

int run_latency(const std::string& csv_path) {
  using jit::DType;
  const std::vector<jit::AttentionShape> shapes = {{2, 8, 256, 64, DType::f16, false},
                                                   {1, 16, 1024, 64, DType::f16, false},
                                                   {32, 8, 128, 64, DType::f16, false}};
  const jit::Target target = jit::current_target();
  fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
  fmt::print("event-timed medians in us; 'scrubbed': a 256 MiB memset before each run, as the grid and the peer benchmark\n");
  fmt::print("{:>3} {:>3} {:>6} {:>4} | {:>9} {:>9} | {:>11} {:>14} | {:>22} | {}\n", "B", "H", "S", "D", "scrubbed",
             "warm L2", "empty 1 CTA", "empty, same", "launch (grid x block, smem)", "variant");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "B,H,S,D,scrubbed_us,warm_l2_us,empty_one_cta_us,empty_same_launch_us,grid,block,smem_bytes,variant\n";
  }
  const jit::TimingOptions scrubbed = launch_floor::latency_timing(true), warm = launch_floor::latency_timing(false);
  for (const jit::AttentionShape& s : shapes) {
    const BenchTensors tensors = bench_tensors(s);
    const jit::TensorView &q = tensors.q.view, &k = tensors.k.view, &v = tensors.v.view, &out = tensors.out;
    jit::AttentionOptions options;
    const jit::AttentionPlan plan = jit::plan_attention(q, k, v, out, options);
    const auto call = [&] { jit::attention(q, k, v, out, options); };
    call();
    jit::synchronize(nullptr);
    const double scrubbed_us = jit::time_on_stream(call, nullptr, scrubbed).median_us;
    const double warm_us = jit::time_on_stream(call, nullptr, warm).median_us;
    // The launch the call made: its family's plan for this problem and config.
    const jit::AttentionLaunch made = jit::attention_launches(q, k, v, out, options, plan.config).front();
    const jit::LaunchGeometry& geometry = made.geometry;
    const double one_us = empty_kernel_us(made, launch_floor::one_cta(), scrubbed);
    const double same_us = empty_kernel_us(made, geometry, scrubbed);
    const std::string launch = fmt::format("{}x{}x{} x {}, {}", geometry.grid.x, geometry.grid.y, geometry.grid.z,
                                           geometry.block.x, geometry.smem_bytes);
    fmt::print("{:3} {:3} {:6} {:4} | {:9.2f} {:9.2f} | {:11.2f} {:14.2f} | {:>22} | {}\n", s.batch, s.heads, s.seq,
               s.head_dim, scrubbed_us, warm_us, one_us, same_us, launch, plan.variant);
    std::fflush(stdout);
    if (csv.is_open()) {
      csv << fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{}x{}x{},{},{},{}\n", s.batch, s.heads, s.seq,
                         s.head_dim, scrubbed_us, warm_us, one_us, same_us, geometry.grid.x, geometry.grid.y,
                         geometry.grid.z, geometry.block.x, geometry.smem_bytes, plan.variant);
    }
  }
  return 0;
}

// Every config the tuner would time for each small shape, scrubbed and warm:
// the tuner times with whatever L2 state the repetitions leave (warm), the
// grid and the peer benchmark scrub before each run, and for a problem whose inputs fit
// in L2 the two can rank configs differently.
int run_latency_configs(const std::string& csv_path) {
  using jit::DType;
  const std::vector<jit::AttentionShape> shapes = {{2, 8, 256, 64, DType::f16, false},
                                                   {1, 16, 1024, 64, DType::f16, false}};
  const jit::Target target = jit::current_target();
  fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
  fmt::print("event-timed medians in us of every kept config of the serving family\n");
  fmt::print("{:>3} {:>3} {:>6} {:>4} | {:>9} {:>9} | {}\n", "B", "H", "S", "D", "scrubbed", "warm L2", "variant");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "B,H,S,D,scrubbed_us,warm_l2_us,variant\n";
  }
  const jit::TimingOptions scrubbed = launch_floor::latency_timing(true), warm = launch_floor::latency_timing(false);
  for (const jit::AttentionShape& s : shapes) {
    const BenchTensors tensors = bench_tensors(s);
    const jit::TensorView &q = tensors.q.view, &k = tensors.k.view, &v = tensors.v.view, &out = tensors.out;
    const jit::AttentionOptions options;
    for (const jit::AttentionPlan& candidate : jit::attention_candidates(q, k, v, out, options)) {
      const std::function<void()> call = jit::attention_call_with_config(q, k, v, out, options, candidate.config);
      call();
      jit::synchronize(nullptr);
      const double scrubbed_us = jit::time_on_stream(call, nullptr, scrubbed).median_us;
      const double warm_us = jit::time_on_stream(call, nullptr, warm).median_us;
      const std::string& variant = candidate.variant;
      fmt::print("{:3} {:3} {:6} {:4} | {:9.2f} {:9.2f} | {}\n", s.batch, s.heads, s.seq, s.head_dim, scrubbed_us,
                 warm_us, variant);
      std::fflush(stdout);
      if (csv.is_open()) {
        csv << fmt::format("{},{},{},{},{:.3f},{:.3f},{}\n", s.batch, s.heads, s.seq, s.head_dim, scrubbed_us,
                           warm_us, variant);
      }
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------
// First call of a new shape class, cold (empty cache directory, new process).

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// In the child: one shape, this process's CUJIT_AUTOTUNE. Prints one row.
int run_first_call_child(const std::string& shape_text, const std::string& dtype_choice) {
  jit::AttentionShape s = jit::parse_attention_shape(shape_text);
  apply_dtype_choice(s, dtype_choice);
  const BenchTensors tensors = bench_tensors(s, dtype_choice == "fp8");
  const jit::TensorView &q = tensors.q.view, &k = tensors.k.view, &v = tensors.v.view, &out = tensors.out;
  jit::AttentionOptions options;
  options.causal = s.causal;
  if (tensors.fp8) options.descale = tensors.fp8->descales;
  jit::current_target();  // the context exists before the clock starts: a user's would
  const auto start = std::chrono::steady_clock::now();
  jit::attention(q, k, v, out, options);
  jit::synchronize(nullptr);
  const double first_ms = ms_since(start);
  const long long first_compiles = jit::stats().nvrtc_compiles;
  const std::string first_variant = jit::plan_attention(q, k, v, out, options).variant;
  // Background: the tuned config serves from the first call after the tuning ends.
  jit::wait_for_background_tuning();
  jit::attention(q, k, v, out, options);
  jit::synchronize(nullptr);
  const double tuned_ms = ms_since(start);
  const std::string tuned_variant = jit::plan_attention(q, k, v, out, options).variant;
  const char* mode = std::getenv("CUJIT_AUTOTUNE");
  const std::string label = dtype_choice == "as-shape" ? shape_text : shape_text + " " + dtype_choice;
  fmt::print("{:10} {:28} | {:13.0f} {:15} | {:16.0f} | {} -> {}\n", mode ? mode : "full", label, first_ms,
             first_compiles, tuned_ms, first_variant, tuned_variant);
  std::fflush(stdout);
  return 0;
}

// In the parent: each shape in each mode, a fresh process and cache directory.
int run_first_call(const std::vector<std::string>& shape_texts, const std::string& dtype_choice, const char* self) {
  const std::vector<std::string> shapes = shape_texts.empty() ? std::vector<std::string>{"1,16,1024,64,f16,0"} : shape_texts;
  fmt::print("{:10} {:28} | {:>13} {:>15} | {:>16} | {}\n", "mode", "shape", "first call ms", "compiles by then",
             "tuned serves ms", "variant first -> tuned");
  std::fflush(stdout);
  int failures = 0;
  for (const std::string& shape : shapes) {
    for (const char* mode : {"full", "background"}) {
      char pattern[] = "/tmp/cujit-first-call-XXXXXX";
      if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
      std::vector<std::string> env_text = {std::string("CUJIT_AUTOTUNE=") + mode,
                                           std::string("CUJIT_CACHE_DIR=") + pattern};
      for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view entry(*e);
        if (!entry.starts_with("CUJIT_AUTOTUNE=") && !entry.starts_with("CUJIT_CACHE_DIR=")) env_text.emplace_back(entry);
      }
      std::vector<char*> envp;
      for (std::string& text : env_text) envp.push_back(text.data());
      envp.push_back(nullptr);
      std::string arg0 = self, flag = "--first-call-child", arg = shape, dtype_flag = "--dtype", dtype = dtype_choice;
      char* argv[] = {arg0.data(), flag.data(), arg.data(), dtype_flag.data(), dtype.data(), nullptr};
      pid_t pid = 0;
      int status = 1;
      if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0 ||
          waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::cerr << "cujit-bench: the " << mode << " run of " << shape << " failed\n";
        ++failures;
      }
      std::error_code ignored;
      std::filesystem::remove_all(pattern, ignored);
    }
  }
  return failures == 0 ? 0 : 1;
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
  bool host_overhead = false;
  std::string host_overhead_csv;
  app.add_flag("--host-overhead", host_overhead,
               "instead of the grid: host time per jit::attention call next to a bare launch, on 2 fixed shapes");
  app.add_option("--host-overhead-csv", host_overhead_csv, "CSV output of --host-overhead (default: none)");
  bool latency = false;
  std::string latency_csv;
  app.add_flag("--latency", latency,
               "instead of the grid: small shapes event-timed next to empty kernels launched the same way");
  app.add_option("--latency-csv", latency_csv, "CSV output of --latency (default: none)");
  bool latency_configs = false;
  app.add_flag("--latency-configs", latency_configs,
               "instead of the grid: every config of the small shapes, scrubbed and warm (CSV: --latency-csv)");
  std::string dtype_choice = "as-shape";
  app.add_option("--dtype", dtype_choice,
                 "the shapes' dtype (the grid's, --shape's, --first-call's): f16, bf16, or fp8 (e4m3 q/k/v, the "
                 "shape's dtype out; the grid times each next to its 16-bit kernel)")
      ->check(CLI::IsMember({"as-shape", "f16", "bf16", "fp8"}));
  bool first_call = false;
  app.add_flag("--first-call", first_call,
               "instead of the grid: a new shape class's first call on an empty cache, CUJIT_AUTOTUNE=full against "
               "background, each in a fresh process, and when the tuned config serves (shapes: --shape; default "
               "1,16,1024,64,f16,0)");
  std::string first_call_child;
  app.add_option("--first-call-child", first_call_child)->group("");  // what --first-call runs in each process
  CLI11_PARSE(app, argc, argv);
  try {
    if (!jit::gpu_present()) {
      std::cerr << "cujit-bench: no GPU here; run it on a GPU machine\n";
      return 2;
    }
    if (host_overhead) return run_host_overhead(host_overhead_csv);
    if (latency) return run_latency(latency_csv);
    if (latency_configs) return run_latency_configs(latency_csv);
    if (!first_call_child.empty()) return run_first_call_child(first_call_child, dtype_choice);
    if (first_call) return run_first_call(shape_texts, dtype_choice, argv[0]);
    std::vector<BenchShape> shapes;
    for (const auto& text : shape_texts) shapes.push_back({"custom", jit::parse_attention_shape(text)});
    if (shapes.empty()) shapes = grid(quick);
    const bool fp8 = dtype_choice == "fp8";
    for (BenchShape& s : shapes) apply_dtype_choice(s.shape, dtype_choice);
    const jit::Target target = jit::current_target();
    fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
    fmt::print("{:10} {:>3} {:>3} {:>6} {:>4} {:>2} {:>5} | {:>10} {:>7} {:>10} | {}{}\n", "tag", "B", "H", "S", "D", "c",
               "dt", "us", "TFLOP/s", "first(ms)", fp8 ? "x16-bit " : "", "variant");
    std::ofstream csv(csv_path);
    csv << "tag,B,H,S,D,causal,dtype,impl,us,tflops,first_call_ms,variant" << (fp8 ? ",sixteen_bit_us" : "") << "\n";
    for (const auto& [tag, s] : shapes) {
      const Measured m = measure(s, fp8);
      const double flops = 4.0 * s.batch * s.heads * double(s.seq) * double(s.seq) * s.head_dim / (s.causal ? 2 : 1);
      const double tflops = flops / (m.timing.median_us * 1e-6) / 1e12;
      const char* dtype = fp8 ? "float8_e4m3fn" : s.dtype == jit::DType::f16 ? "float16" : "bfloat16";
      // FP8: the same shape with 16-bit inputs, and FP8's speedup over it.
      const double sixteen_bit_us = fp8 ? measure(s, false).timing.median_us : 0;
      const std::string speedup = fp8 ? fmt::format("{:6.2f}x ", sixteen_bit_us / m.timing.median_us) : "";
      fmt::print("{:10} {:3} {:3} {:6} {:4} {:2} {:>5} | {:10.1f} {:7.0f} {:10.0f} | {}{}\n", tag, s.batch, s.heads,
                 s.seq, s.head_dim, int(s.causal), fp8 ? "fp8" : jit::to_string(s.dtype), m.timing.median_us, tflops,
                 m.first_ms, speedup, m.plan.variant);
      std::fflush(stdout);
      csv << fmt::format("{},{},{},{},{},{},{},cujit,{:.3f},{:.2f},{:.1f},{}", tag, s.batch, s.heads, s.seq,
                         s.head_dim, s.causal ? "True" : "False", dtype, m.timing.median_us, tflops, m.first_ms,
                         m.plan.variant)
          << (fp8 ? fmt::format(",{:.3f}", sixteen_bit_us) : "") << "\n";
    }
    const jit::Stats st = jit::stats();
    fmt::print("nvrtc compiles {}, disk cache hits {}, tuning runs {}, tuning DB hits {}\n", st.nvrtc_compiles,
               st.disk_cache_hits, st.tuning_runs, st.tuning_db_hits);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << tool_message("cujit-bench", e) << "\n";
    return 1;
  }
}
