// cujit-serving-bench: attention over a KV cache as serving runs it, against
// what the GPU's memory allows, in one run (issue 19's performance bars):
//  1. the device-to-device copy rate (bytes read + written / time);
//  2. decode (Sq = 1) over a contiguous cache: time, K+V bytes / time and its
//     fraction of the copy rate, beside the fraction a read at the copy rate
//     after one launch floor (cujit-bench --latency's empty one-CTA kernel)
//     would reach; the small shape against copy time plus that floor;
//  3. the same decodes over a paged cache (page sizes 16 and 1, pages
//     shuffled over the pool, or with --pages-in-order each sequence's pages
//     one after another) against the contiguous time, each shape's
//     contiguous and paged decodes timed in the same rotating rounds; with
//     --head-major both caches keep each head's keys together ([.., Hkv, S,
//     D]); with --descale-per-page FP8 pools carry factors per page;
//     --shape B,Hq,Hkv,Sk,D,dtype[,kv] times those decodes instead of the list;
//  4. a decode step (GEMM -> attention -> GEMM) in a CUDA graph with
//     programmatic dependent launch on and off, each in a child process
//     (CUJIT_PDL is read once per process).
// Every ratio is printed with its bar and PASS/MISS; a miss is not an error.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "jit/cujit.h"
#include "jit/serving.h"
#include "tools/cuda_runtime_check.h"
#include "tools/kv_cache_buffers.h"
#include "tools/launch_floor.h"
#include "tools/rotating_rounds.h"
#include "tools/serving_report.h"
#include "tools/serving_shapes.h"
#include "tools/tool_message.h"
#ifdef CUJIT_SERVING_BENCH_CUBLAS
#include "tools/decode_step_graph.h"
#endif

extern char** environ;

namespace serving_bench {
namespace {

constexpr const char* kTool = "cujit-serving-bench";
constexpr std::size_t kCopyBytes = std::size_t(1) << 30;
// The serving plan does not show its kernels' parameter struct; the floor's
// empty kernel takes one the size of the dense attention kernel's.
constexpr std::size_t kFloorParamsBytes = 256, kFloorParamsAlign = 8;
constexpr double kSmallDecodeBar = 2.0, kGeomeanBar = 0.90, kFractionBar = 0.85;

// Decodes and the copy, timed alike: L2 scrubbed before each run (the small
// shape's cache would otherwise be served from L2) by a read, which leaves no
// dirty lines for the timed run to write back (jit/l2_scrub.h), median of many.
jit::TimingOptions memory_timing(bool quick) {
  jit::TimingOptions timing;
  timing.warmup = 5;
  timing.min_reps = quick ? 10 : 20;
  timing.max_reps = quick ? 50 : 200;
  timing.target_ms = quick ? 15 : 50;
  timing.flush_l2 = true;
  timing.l2_flush = jit::L2Flush::read;
  return timing;
}

// Metrics go to the CSV as they are measured, so a run cut short keeps what it had.
class Results {
 public:
  explicit Results(std::ofstream& csv) : csv_(csv) { write_csv_header(csv_); }
  const Metric& add(Metric metric) {
    write_csv_row(csv_, metric);
    csv_.flush();
    metrics_.push_back(std::move(metric));
    return metrics_.back();
  }
  std::vector<Metric> all() const { return {metrics_.begin(), metrics_.end()}; }

 private:
  std::ofstream& csv_;
  std::deque<Metric> metrics_;  // add()'s references stay valid
};

Metric metric(std::string part, const DecodeShape* shape, std::int64_t page_size, std::string name, double value,
              std::optional<Bar> bar = std::nullopt, std::string variant = "") {
  Metric m;
  m.part = std::move(part);
  if (shape) {
    m.shape = label(*shape);
    m.dtype = jit::to_string(shape->dtype);
  }
  m.page_size = page_size;
  m.name = std::move(name);
  m.value = value;
  m.bar = bar;
  m.variant = std::move(variant);
  return m;
}

// Runs one part of the benchmark; a failure is printed and counted, and the
// run goes on so that the rest of the table still comes out.
class Failures {
 public:
  template <class Part>
  void run(const std::string& what, Part&& part) {
    try {
      part();
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::cerr << tool_message(kTool, e) << " (" << what << ")\n";
      ++count_;
    }
  }
  int count() const { return count_; }

 private:
  int count_ = 0;
};

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// What the run measures first: bytes read + written per microsecond.
struct Floors {
  double copy_bytes_per_us = 0;
  double launch_us = 0;
};

Floors measure_floors(Results& results, jit::Stream stream, bool quick) {
  Floors floors;
  {
    const jit::DeviceBuffer source(kCopyBytes), target(kCopyBytes);
    // cudaMemcpyAsync between device pointers is the driver's cuMemcpyDtoDAsync.
    const auto copy = [&] {
      SERVING_CUDA_CHECK(cudaMemcpyAsync(target.data(), source.data(), kCopyBytes, cudaMemcpyDeviceToDevice, stream));
    };
    const double us = jit::time_on_stream(copy, stream, memory_timing(quick)).median_us;
    floors.copy_bytes_per_us = 2.0 * double(kCopyBytes) / us;
    fmt::print("device-to-device copy of 1 GiB: {:.1f} us, {:.3f} TB/s (bytes read + written)\n", us,
               floors.copy_bytes_per_us / 1e6);
    results.add(metric("copy", nullptr, 0, "time_us", us));
    results.add(metric("copy", nullptr, 0, "tb_per_s", floors.copy_bytes_per_us / 1e6));
  }
  floors.launch_us = launch_floor::empty_kernel_us(kFloorParamsBytes, kFloorParamsAlign, launch_floor::one_cta(),
                                                   launch_floor::latency_timing(true), stream);
  fmt::print("launch floor (empty kernel, one CTA, timed as cujit-bench --latency): {:.2f} us\n", floors.launch_us);
  results.add(metric("launch_floor", nullptr, 0, "time_us", floors.launch_us));
  std::fflush(stdout);
  return floors;
}

// One side of a shape's decode: a cache, contiguous or paged, and the plan
// that runs over it (planned, and tuned on first use, before any timing).
struct DecodeSide {
  std::int64_t page_size = 0;  // 0: contiguous
  double bar = 0;              // a paged side's bar on its time over the contiguous one
  std::optional<ContiguousCache> contiguous;
  std::optional<PagedCache> paged;
  jit::KvAttentionPlan plan;
  double plan_ms = 0;
  const jit::KvCache& cache() const { return contiguous ? contiguous->cache : paged->cache; }
};

DecodeSide plan_side(const DecodeShape& s, const PagedCase* paged, const DecodeInputs& inputs,
                     const CacheLayout& layout, jit::Stream stream) {
  DecodeSide side;
  if (paged) {
    side.page_size = paged->page_size;
    side.bar = paged->bar;
    side.paged = paged_cache(s, paged->page_size, inputs, layout);
  } else {
    side.contiguous = contiguous_cache(s, inputs, layout);
  }
  const auto start = std::chrono::steady_clock::now();
  side.plan = jit::plan_kv_attention(kv_attention_shape(s, side.page_size, layout), {}, stream);
  side.plan_ms = milliseconds_since(start);
  return side;
}

// A shape's sides timed in the same rotating rounds (tools/rotating_rounds.h).
rotating_rounds::RoundTimes time_sides(const std::deque<DecodeSide>& sides, const DecodeInputs& inputs,
                                       jit::Stream stream, bool quick) {
  jit::KvRunOptions run;
  run.stream = stream;
  std::vector<std::function<void()>> calls;
  for (const DecodeSide& side : sides) {
    calls.push_back([&inputs, &side, run] { side.plan.run(inputs.q, side.cache(), inputs.out, run); });
  }
  return rotating_rounds::time_calls(calls, quick ? 3 : 5, stream, memory_timing(quick));
}

// The floor is a larger share of the smaller caches and of the faster
// memories: MQA's 67 MB reach at most 0.85 of the copy rate on an H100 and
// 0.81 on an H200.
double ceiling_of(const DecodeShape& s, const Floors& floors) {
  return fraction_of_copy_ceiling(kv_bytes(s), floors.copy_bytes_per_us, floors.launch_us);
}

void print_decode_header() {
  fmt::print("\ndecode, Sq = 1, every sequence Sk keys; K+V read once; L2 scrubbed before each run; ceiling: the "
             "fraction of copy a read at the copy rate after one launch floor would reach\n");
  fmt::print("{:<34} {:>4} {:>4} {:>8} {:>9} {:>7} {:>7} {:>7} {:>8} {:>11} {:>8} | {}\n", "shape", "dt", "page",
             "K+V MB", "us", "TB/s", "of copy", "ceiling", "ratio", "bar", "plan ms", "variant");
}

void print_decode_row(const DecodeShape& s, const Floors& floors, std::int64_t page_size, double us, double fraction,
                      const Metric* ratio, double plan_ms, const std::string& variant) {
  const std::string ratio_text = ratio ? fmt::format("{:.3f}", ratio->value) : "";
  const std::string bar_text = ratio && ratio->bar ? fmt::format("{} {}", ratio->bar->text(), verdict(*ratio)) : "";
  fmt::print("{:<34} {:>4} {:>4} {:>8.1f} {:>9.1f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8} {:>11} {:>8.0f} | {}\n", label(s),
             jit::to_string(s.dtype), page_size ? std::to_string(page_size) : "-", kv_bytes(s) / 1e6, us,
             kv_bytes(s) / us / 1e6, fraction, ceiling_of(s, floors), ratio_text, bar_text, plan_ms, variant);
  std::fflush(stdout);
}

// The contiguous decode's row.
void report_contiguous(Results& results, const Floors& floors, const DecodeShape& s, const DecodeSide& side,
                       double us, std::vector<double>& barred_fractions) {
  const std::string variant = side.plan.variant();
  const double fraction = kv_bytes(s) / us / floors.copy_bytes_per_us;
  const bool barred = kv_bytes(s) >= kBarBytes;
  results.add(metric("decode", &s, 0, "time_us", us, std::nullopt, variant));
  results.add(metric("decode", &s, 0, "fraction_of_copy_ceiling", ceiling_of(s, floors)));
  const Metric& fraction_metric =
      results.add(metric("decode", &s, 0, "fraction_of_copy", fraction,
                         barred ? std::optional<Bar>(Bar{Bar::Kind::AtLeast, kFractionBar}) : std::nullopt, variant));
  if (barred && !s.fp8_kv) barred_fractions.push_back(fraction);  // issue 19's mean: 16-bit caches
  const Metric* ratio = barred ? &fraction_metric : nullptr;
  if (s == small_decode()) {
    // The time a copy of the same bytes would take, plus one launch.
    const double reference_us = kv_bytes(s) / floors.copy_bytes_per_us + floors.launch_us;
    ratio = &results.add(metric("decode", &s, 0, "time_over_copy_plus_floor", us / reference_us,
                                Bar{Bar::Kind::AtMost, kSmallDecodeBar}, variant));
  }
  print_decode_row(s, floors, 0, us, fraction, ratio, side.plan_ms, variant);
}

// A paged decode's row; over_contiguous is absent when the contiguous
// decode could not be planned.
void report_paged(Results& results, const Floors& floors, const DecodeShape& s, const DecodeSide& side, double us,
                  std::optional<double> over_contiguous) {
  const std::string variant = side.plan.variant();
  results.add(metric("paged", &s, side.page_size, "time_us", us, std::nullopt, variant));
  const Metric* ratio = nullptr;
  if (over_contiguous)
    ratio = &results.add(metric("paged", &s, side.page_size, "paged_over_contiguous", *over_contiguous,
                                Bar{Bar::Kind::AtMost, side.bar}, variant));
  print_decode_row(s, floors, side.page_size, us, kv_bytes(s) / us / floors.copy_bytes_per_us, ratio, side.plan_ms,
                   variant);
}

// Contiguous then paged decodes of every shape whose label holds `only`,
// timed in the same rounds, then the geometric mean of the barred rows'
// fractions of the copy rate.
void measure_decodes(Results& results, const Floors& floors, jit::Stream stream, bool quick,
                     const CacheLayout& layout, const std::vector<DecodeShape>& shapes, const std::string& only,
                     Failures& failures) {
  print_decode_header();
  std::vector<double> barred_fractions;
  for (const DecodeShape& s : shapes) {
    if (label(s).find(only) == std::string::npos) continue;
    const DecodeInputs inputs = decode_inputs(s);
    std::deque<DecodeSide> sides;
    failures.run(label(s) + ", contiguous", [&] { sides.push_back(plan_side(s, nullptr, inputs, layout, stream)); });
    for (const PagedCase& paged : paged_cases()) {
      failures.run(fmt::format("{}, page size {}", label(s), paged.page_size),
                   [&] { sides.push_back(plan_side(s, &paged, inputs, layout, stream)); });
    }
    if (sides.empty()) continue;
    failures.run(label(s) + ", timing", [&] {
      // Side 0 is the contiguous one unless it could not be planned.
      const bool has_contiguous = sides.front().page_size == 0;
      const rotating_rounds::RoundTimes times = time_sides(sides, inputs, stream, quick);
      for (std::size_t k = 0; k < sides.size(); ++k) {
        if (sides[k].page_size == 0) {
          report_contiguous(results, floors, s, sides[k], times.median_us(k), barred_fractions);
        } else {
          report_paged(results, floors, s, sides[k], times.median_us(k),
                       has_contiguous ? std::optional<double>(times.median_ratio(k, 0)) : std::nullopt);
        }
      }
    });
  }
  if (barred_fractions.empty()) return;
  const double geomean = geometric_mean(barred_fractions);
  Metric m = metric("summary", nullptr, 0, "geomean_fraction_of_copy", geomean, Bar{Bar::Kind::AtLeast, kGeomeanBar});
  m.shape = fmt::format("{} 16-bit-cache decodes with K+V >= 64 MB", barred_fractions.size());
  fmt::print("geometric mean of the fractions of the copy rate over the {}: {:.3f} (bar {}: {})\n", m.shape, geomean,
             m.bar->text(), verdict(m));
  results.add(std::move(m));
}

// A stream of our own: a graph cannot be captured on the default stream.
class OwnedStream {
 public:
  OwnedStream() { SERVING_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() { cudaStreamDestroy(stream_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  jit::Stream get() const { return stream_; }

 private:
  jit::Stream stream_ = nullptr;  // a cudaStream_t: one type
};

// ---------------------------------------------------------------------------
// The decode step in a CUDA graph.

#ifdef CUJIT_SERVING_BENCH_CUBLAS
std::string pdl_metric_name(bool pdl) { return pdl ? "step_us_pdl_on" : "step_us_pdl_off"; }

// --pdl: this process times the graphs with CUJIT_PDL as set in main().
void measure_graphs_here(Results& results, jit::Stream stream, bool pdl, bool quick) {
  fmt::print("decode step in a CUDA graph, PDL {}: GEMM -> attention -> GEMM, {} steps per graph, L2 warm\n",
             pdl ? "on" : "off", kGraphSteps);
  for (const DecodeShape& s : graph_shapes(quick)) {
    const GraphStepTiming t = time_decode_step_graph(s, stream, quick);
    results.add(metric("graph", &s, 0, pdl_metric_name(pdl), t.step_us, std::nullopt, t.variant));
    fmt::print("{:<34} {:>4} {:>9.2f} us per step | {}\n", label(s), jit::to_string(s.dtype), t.step_us, t.variant);
    std::fflush(stdout);
  }
}

// Runs this program with --pdl in a child process and returns its graph
// metrics; stdout is dropped (the parent prints the table), stderr kept.
std::vector<Metric> graph_metrics_in_child(bool pdl, bool quick) {
  const std::filesystem::path csv =
      std::filesystem::temp_directory_path() / fmt::format("cujit-serving-bench-{}-pdl{}.csv", ::getpid(), int(pdl));
  std::vector<std::string> args = {kTool, "--pdl", pdl ? "1" : "0", "--csv", csv.string()};
  if (quick) args.push_back("--quick");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t child = 0;
  const int spawn_error = posix_spawn(&child, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0)
    throw jit::Error(jit::ErrorCode::Internal,
                     fmt::format("could not start the graph part: {}", std::strerror(spawn_error)));
  int status = 0;
  ::waitpid(child, &status, 0);
  std::vector<Metric> metrics;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::ifstream in(csv);
    metrics = read_csv(in);
  }
  std::error_code ignored;
  std::filesystem::remove(csv, ignored);
  if (metrics.empty())
    throw jit::Error(jit::ErrorCode::Internal,
                     fmt::format("the graph part with PDL {} failed (its error is above)", pdl ? "on" : "off"));
  return metrics;
}

void measure_graphs(Results& results, bool quick, Failures& failures) {
  fmt::print(
      "\ndecode step in a CUDA graph: GEMM -> attention -> GEMM (cuBLAS, [B, Hq*D] x [Hq*D, Hq*D]), {} steps "
      "per graph, L2 warm, each PDL setting in its own process\n",
      kGraphSteps);
  std::fflush(stdout);
  // shape -> {PDL on, PDL off} step time
  std::map<std::string, std::map<bool, Metric>> steps;
  for (bool pdl : {true, false}) {
    failures.run(fmt::format("graph, PDL {}", pdl ? "on" : "off"), [&] {
      for (Metric& m : graph_metrics_in_child(pdl, quick)) {
        steps[m.shape + " " + m.dtype][pdl] = m;
        results.add(std::move(m));
      }
    });
  }
  fmt::print("{:<39} {:>11} {:>11} {:>8} | {}\n", "shape", "PDL on us", "PDL off us", "on/off", "variant");
  for (const auto& [shape, both] : steps) {
    const auto time_text = [&](bool pdl) { return both.count(pdl) ? fmt::format("{:.2f}", both.at(pdl).value) : "-"; };
    std::string ratio_text = "-";
    if (both.count(true) && both.count(false)) {
      Metric ratio = both.at(true);
      ratio.name = "pdl_on_over_off";
      ratio.value = both.at(true).value / both.at(false).value;
      ratio_text = fmt::format("{:.3f}", ratio.value);
      results.add(std::move(ratio));
    }
    fmt::print("{:<39} {:>11} {:>11} {:>8} | {}\n", shape, time_text(true), time_text(false), ratio_text,
               both.begin()->second.variant);
  }
  std::fflush(stdout);
}
#endif

// shapes: --shape's, or empty for the standard list (decode_shapes), which
// alone comes with the CUDA graph part (and then only without --only).
int run_all(Results& results, bool quick, const CacheLayout& layout, const std::vector<DecodeShape>& shapes,
            const std::string& only) {
  const jit::Target target = jit::current_target();  // Error(NoDevice) without a GPU
  fmt::print("device: {} ({}, {} SMs), cache: {}\n", target.device_name, target.arch, target.sm_count,
             jit::cache_directory());
  Failures failures;
  {
    const OwnedStream stream;
    const Floors floors = measure_floors(results, stream.get(), quick);
    measure_decodes(results, floors, stream.get(), quick, layout, shapes.empty() ? decode_shapes(quick) : shapes,
                    only, failures);
  }
#ifdef CUJIT_SERVING_BENCH_CUBLAS
  if (only.empty() && shapes.empty()) measure_graphs(results, quick, failures);
#else
  fmt::print("\ndecode step in a CUDA graph: skipped (built without cuBLAS)\n");
#endif
  fmt::print("\nbars (issue 19; a MISS is reported, not an error)\n{}", bars_table(results.all()));
  const jit::Stats st = jit::stats();
  fmt::print("nvrtc compiles {}, disk cache hits {}, tuning runs {}, tuning DB hits {}\n", st.nvrtc_compiles,
             st.disk_cache_hits, st.tuning_runs, st.tuning_db_hits);
  std::fflush(stdout);
  if (failures.count() > 0) {
    std::cerr << fmt::format("{}: {} part(s) failed (above)\n", kTool, failures.count());
    return 1;
  }
  return 0;
}

int run_graph_only(Results& results, bool pdl, bool quick) {
  const jit::Target target = jit::current_target();  // Error(NoDevice) without a GPU
#ifdef CUJIT_SERVING_BENCH_CUBLAS
  fmt::print("device: {} ({}), cache: {}\n", target.device_name, target.arch, jit::cache_directory());
  const OwnedStream stream;
  measure_graphs_here(results, stream.get(), pdl, quick);
  return 0;
#else
  (void)results, (void)pdl, (void)quick, (void)target;
  throw jit::Error(jit::ErrorCode::Unsupported, "--pdl times the CUDA graph part, and this build has no cuBLAS");
#endif
}

}  // namespace
}  // namespace serving_bench

int main(int argc, char** argv) {
  using namespace serving_bench;
  CLI::App app{
      "cujit-serving-bench: decode attention over contiguous and paged KV caches against the copy rate of "
      "the same run, and a decode step in a CUDA graph with PDL on and off; prints every ratio with its "
      "bar (issue 19)"};
  bool quick = false, pages_in_order = false, head_major = false, descale_per_page = false;
  std::string csv_path = "cujit-serving.csv", only;
  std::vector<std::string> shape_texts;
  int pdl = 1;
  app.add_flag("--quick", quick, "three decode shapes and one graph shape, fewer repetitions");
  app.add_option("--csv", csv_path, "CSV output, one metric per row")->capture_default_str();
  app.add_option("--only", only,
                 "only the decode shapes whose label holds this text (e.g. \"Sk=8192 D=128\" or \"fp8\"), and no "
                 "CUDA graph part");
  app.add_option("--shape", shape_texts,
                 "a decode shape B,Hq,Hkv,Sk,D,dtype[,kv] instead of the standard list (repeatable; e.g. "
                 "4,64,1,32768,128,bf16 or 8,32,8,8192,128,f16,e4m3), and no CUDA graph part");
  app.add_flag("--pages-in-order", pages_in_order,
               "each sequence's pages one after another in the pool instead of shuffled over it");
  app.add_flag("--head-major", head_major,
               "caches [B, Hkv, S, D] and pools [pages, Hkv, page size, D] (each head's keys one after another) "
               "instead of the serving engines' [.., S, Hkv, D]");
  app.add_flag("--descale-per-page", descale_per_page,
               "FP8 page pools with descale factors per (page, KV head) instead of per (sequence, KV head)");
  CLI::Option* pdl_option =
      app.add_option("--pdl", pdl,
                     "only the decode step in a CUDA graph, with programmatic dependent launch on (1) or off (0) "
                     "(sets CUJIT_PDL for this process; the full run does both in child processes)")
          ->check(CLI::IsMember({0, 1}));
  CLI11_PARSE(app, argc, argv);
  // Before any cujit call: the knob is read once per process.
  if (*pdl_option) ::setenv("CUJIT_PDL", pdl ? "1" : "0", 1);
  try {
    // Fail before minutes of timing, not after.
    std::ofstream csv(csv_path);
    if (!csv) throw jit::Error(jit::ErrorCode::InvalidArgument, fmt::format("--csv: cannot write {}", csv_path));
    Results results(csv);
    const CacheLayout layout{pages_in_order ? PageOrder::in_order : PageOrder::shuffled, head_major,
                             descale_per_page};
    std::vector<DecodeShape> shapes;
    for (const std::string& text : shape_texts) shapes.push_back(parse_decode_shape(text));
    return *pdl_option ? run_graph_only(results, pdl == 1, quick) : run_all(results, quick, layout, shapes, only);
  } catch (const std::exception& e) {
    std::cerr << tool_message(kTool, e) << "\n";
    return 1;
  }
}
