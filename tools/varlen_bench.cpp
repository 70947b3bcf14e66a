// cujit-varlen-bench: ragged (variable-length) prefill against the dense
// kernel, in one run (issue 19's ragged bars):
//  1. equal lengths: B sequences of L rows packed, against jit::attention on
//     the same memory viewed as [B, L, H, D]: dense time / ragged time
//     (bar 0.95: within 5%);
//  2. mixed lengths (64 sequences, lengths uniform in 128..8192, a fixed
//     seed): ragged TFLOP/s against the dense kernel's at the same mean
//     length and about the same FLOPs (bar 0.90).
// --dtype fp8 runs both sides with q, k, v in e4m3 (one descale factor of 1,
// bf16 out). FLOPs count the visible (query, key) pairs: 4 * D * Hq per pair. Prints
// every ratio with its bar and PASS/MISS; a miss is not an error. The ragged
// side is timed twice: one attention_varlen call (the tile list made on every
// call), and a jit::VarlenAttentionPlan's run (the list made once by
// prepare, as a model step shares it between its layers). The sides are
// timed in rotating rounds and each ratio is the median of the rounds' (the
// run's clock drift cancels). Each side
// tunes its own config; with CUJIT_AUTOTUNE=off both run the default config,
// which isolates what the ragged path itself costs. bench/varlen_peers.py
// compares the same mixed batch with PyTorch SDPA padded.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "jit/cujit.h"
#include "tools/rotating_rounds.h"
#include "tools/tool_message.h"
#include "tools/unit_descale.h"

namespace {

constexpr const char* kTool = "cujit-varlen-bench";
constexpr double kEqualBar = 0.95, kMixedBar = 0.90;

struct Heads {
  std::int64_t q = 32, kv = 8, d = 128;
};

// Visible (query, key) pairs of one self-attention sequence of L rows.
double pairs(std::int64_t len, bool causal) {
  const double l = double(len);
  return causal ? l * (l + 1) / 2 : l * l;
}

double tflops(double pair_count, const Heads& h, double us) { return 4.0 * double(h.d * h.q) * pair_count / us * 1e-6; }

// The inputs' element type and the output's: f16 or bf16 for both, or e4m3
// in and bf16 out (FP8, with one descale factor of 1 for all).
struct Dtypes {
  jit::DType in, out;
  bool fp8() const { return in == jit::DType::e4m3; }
};

// Packed q, k, v (and out) of `total` rows, shared by the dense and ragged
// calls of one comparison, and FP8's descale factor.
struct Packed {
  jit::DeviceTensor q, k, v, out;
  std::optional<UnitDescale> fp8;  // set for e4m3 inputs
  Packed(const Dtypes& dt, const Heads& h, std::int64_t total)
      : q(jit::random_tensor(dt.in, 1, total, h.q, h.d, 1)),
        k(jit::random_tensor(dt.in, 1, total, h.kv, h.d, 2)),
        v(jit::random_tensor(dt.in, 1, total, h.kv, h.d, 3)),
        out(jit::random_tensor(dt.out, 1, total, h.q, h.d, 4)) {
    if (dt.fp8()) fp8.emplace();
  }
  jit::Fp8Descale descales() const { return fp8 ? fp8->descales : jit::Fp8Descale{}; }
  // The rows as a [b, len, H, D] batch (b * len == total), or as packed.
  static jit::TensorView view(const jit::DeviceTensor& t, std::int64_t b, std::int64_t len, std::int64_t heads,
                              std::int64_t d) {
    return jit::TensorView::bshd(t.view.data, t.view.dtype, b, len, heads, d);
  }
};

struct Ragged {
  jit::DeviceBuffer cu;
  jit::VarlenBatch batch;
  explicit Ragged(const std::vector<std::int64_t>& lens) {
    std::vector<std::int32_t> sums(lens.size() + 1, 0);
    for (std::size_t b = 0; b < lens.size(); ++b) sums[b + 1] = sums[b] + std::int32_t(lens[b]);
    cu = jit::DeviceBuffer(sums.size() * sizeof(std::int32_t));
    cu.upload(sums.data(), sums.size() * sizeof(std::int32_t));
    batch.cu_seqlens_q = batch.cu_seqlens_k = static_cast<const std::int32_t*>(cu.data());
    batch.batch = std::int64_t(lens.size());
    batch.max_seqlen_q = batch.max_seqlen_k = *std::max_element(lens.begin(), lens.end());
  }
};

jit::TimingOptions timing(bool quick) {
  jit::TimingOptions t;
  t.warmup = 2;
  t.min_reps = quick ? 5 : 10;
  t.max_reps = quick ? 10 : 30;
  t.target_ms = quick ? 10 : 30;
  return t;
}

using Call = std::function<void()>;

// The packed rows as one ragged batch: its views and options.
struct RaggedArgs {
  jit::TensorView q, k, v, out;
  jit::AttentionOptions options;
};

RaggedArgs ragged_args(Packed& p, const Heads& h, std::int64_t total, bool causal) {
  RaggedArgs a{Packed::view(p.q, 1, total, h.q, h.d), Packed::view(p.k, 1, total, h.kv, h.d),
               Packed::view(p.v, 1, total, h.kv, h.d), Packed::view(p.out, 1, total, h.q, h.d), {}};
  a.options.causal = causal;
  a.options.align = jit::CausalAlign::BottomRight;
  a.options.descale = p.descales();
  return a;
}

// The ragged batch in one call.
Call ragged_call(Packed& p, const Ragged& r, const Heads& h, std::int64_t total, bool causal) {
  const RaggedArgs a = ragged_args(p, h, total, causal);
  return [a, &r] { jit::attention_varlen(a.q, a.k, a.v, a.out, r.batch, a.options); };
}

// The call on the first b * len packed rows as a dense [b, len] batch.
Call dense_call(Packed& p, const Heads& h, std::int64_t b, std::int64_t len, bool causal) {
  jit::AttentionOptions o;
  o.causal = causal;
  o.descale = p.descales();
  const auto q = Packed::view(p.q, b, len, h.q, h.d), k = Packed::view(p.k, b, len, h.kv, h.d),
             v = Packed::view(p.v, b, len, h.kv, h.d), out = Packed::view(p.out, b, len, h.q, h.d);
  return [=] { jit::attention(q, k, v, out, o); };
}

// The ragged rows through a plan: the tile list made once, here; each call
// is a run (one layer of a model step).
Call planned_call(Packed& p, const Ragged& r, const Heads& h, std::int64_t total, bool causal) {
  const RaggedArgs a = ragged_args(p, h, total, causal);
  auto plan = std::make_shared<jit::VarlenAttentionPlan>(
      jit::plan_attention_varlen(a.q, a.k, a.v, a.out, r.batch, a.options));
  plan->prepare(r.batch);
  const jit::VarlenRunOptions run{nullptr, nullptr, a.options.descale};
  return [a, plan, run] { plan->run(a.q, a.k, a.v, a.out, run); };
}

// Dense, ragged and planned timed in rounds that rotate which goes first, so
// that clock and thermal drift during the run move every side alike: the
// medians over the rounds of each side's time and of the per-round ratios
// dense / ragged and dense / planned. All are compiled and tuned first.
struct Timed {
  double dense_us, ragged_us, planned_us, ratio, planned_ratio;
};

Timed time_sides(const Call& dense, const Call& ragged, const Call& planned, bool quick) {
  const std::vector<Call> calls = {dense, ragged, planned};
  for (const Call& call : calls) call();
  const rotating_rounds::RoundTimes t = rotating_rounds::time_calls(calls, quick ? 3 : 9, nullptr, timing(quick));
  return {t.median_us(0), t.median_us(1), t.median_us(2), t.median_ratio(0, 1), t.median_ratio(0, 2)};
}

const char* verdict(double ratio, double bar) { return ratio >= bar ? "PASS" : "MISS"; }

struct Tally {
  int misses = 0;
  std::vector<double> ratios;
  void add(double ratio, double bar) {
    ratios.push_back(ratio);
    misses += ratio < bar;
  }
};

using EqualShape = std::pair<std::int64_t, std::int64_t>;  // B, L

void equal_lengths(const Dtypes& dtype, const Heads& h, std::vector<EqualShape> shapes, bool quick, Tally& tally) {
  fmt::print("\nequal lengths: dense [B, L] against the same rows as a ragged batch, one call and a plan's run "
             "(bar {:.2f})\n",
             kEqualBar);
  fmt::print("{:<24} {:>11} {:>11} {:>8} {:>6} {:>11} {:>8} {:>6}\n", "shape", "dense us", "ragged us", "ratio", "",
             "planned us", "ratio", "");
  if (shapes.empty()) shapes = {{16, 1024}, {8, 2048}, {4, 4096}, {2, 8192}};
  if (quick) shapes = {{8, 2048}};
  for (bool causal : {true, false}) {
    for (auto [b, len] : shapes) {
      const std::int64_t total = b * len;
      Packed p(dtype, h, total);
      const Ragged r(std::vector<std::int64_t>(std::size_t(b), len));
      const Timed t = time_sides(dense_call(p, h, b, len, causal), ragged_call(p, r, h, total, causal),
                                 planned_call(p, r, h, total, causal), quick);
      tally.add(t.ratio, kEqualBar);
      tally.add(t.planned_ratio, kEqualBar);
      fmt::print("{:<24} {:>11.1f} {:>11.1f} {:>8.3f} {:>6} {:>11.1f} {:>8.3f} {:>6}\n",
                 fmt::format("B={} L={}{}", b, len, causal ? " causal" : ""), t.dense_us, t.ragged_us, t.ratio,
                 verdict(t.ratio, kEqualBar), t.planned_us, t.planned_ratio, verdict(t.planned_ratio, kEqualBar));
      std::fflush(stdout);  // a run cut short keeps its rows
    }
  }
}

void mixed_lengths(const Dtypes& dtype, const Heads& h, bool quick, Tally& tally) {
  std::mt19937_64 rng(19);
  std::uniform_int_distribution<std::int64_t> length(128, 8192);
  std::vector<std::int64_t> lens(64);
  for (auto& l : lens) l = length(rng);
  const std::int64_t total = std::accumulate(lens.begin(), lens.end(), std::int64_t{0});
  const std::int64_t mean = total / std::int64_t(lens.size());
  fmt::print("\nmixed lengths: {} sequences of 128..8192 rows ({} in all, mean {}), ragged TFLOP/s against the "
             "dense kernel's at the mean length (bar {:.2f})\n",
             lens.size(), total, mean, kMixedBar);
  fmt::print("{:<10} {:>11} {:>9} {:>16} {:>9} {:>8} {:>6} {:>11} {:>8} {:>6}\n", "mask", "ragged us", "TFLOP/s",
             "dense shape", "TFLOP/s", "ratio", "", "planned us", "ratio", "");
  for (bool causal : {true, false}) {
    Packed p(dtype, h, total);
    const Ragged r(lens);
    double ragged_pairs = 0;
    for (std::int64_t l : lens) ragged_pairs += pairs(l, causal);
    // The dense batch of the mean length with about the ragged batch's FLOPs.
    const std::int64_t b = std::max<std::int64_t>(1, std::llround(ragged_pairs / pairs(mean, causal)));
    const std::int64_t dense_rows = std::min(b * mean, total);
    const std::int64_t dense_b = dense_rows / mean;
    const double dense_pairs = double(dense_b) * pairs(mean, causal);
    const Timed t = time_sides(dense_call(p, h, dense_b, mean, causal), ragged_call(p, r, h, total, causal),
                               planned_call(p, r, h, total, causal), quick);
    const double ragged_rate = tflops(ragged_pairs, h, t.ragged_us);
    const double dense_rate = tflops(dense_pairs, h, t.dense_us);
    // Rate over rate, from the per-round time ratios: the FLOPs are fixed.
    const double ratio = t.ratio * ragged_pairs / dense_pairs;
    const double planned_ratio = t.planned_ratio * ragged_pairs / dense_pairs;
    tally.add(ratio, kMixedBar);
    tally.add(planned_ratio, kMixedBar);
    fmt::print("{:<10} {:>11.1f} {:>9.1f} {:>16} {:>9.1f} {:>8.3f} {:>6} {:>11.1f} {:>8.3f} {:>6}\n",
               causal ? "causal" : "full", t.ragged_us, ragged_rate, fmt::format("B={} L={}", dense_b, mean),
               dense_rate, ratio, verdict(ratio, kMixedBar), t.planned_us, planned_ratio,
               verdict(planned_ratio, kMixedBar));
    std::fflush(stdout);
  }
}

// "16x1024" -> (16, 1024).
EqualShape parse_equal_shape(const std::string& text) {
  const auto x = text.find('x');
  std::int64_t b = 0, len = 0;
  try {
    if (x == std::string::npos) throw std::invalid_argument(text);
    b = std::stoll(text.substr(0, x));
    len = std::stoll(text.substr(x + 1));
  } catch (const std::logic_error&) {
    throw jit::Error(jit::ErrorCode::InvalidArgument, fmt::format("--equal {}: not BxL (e.g. 16x1024)", text));
  }
  if (b < 1 || len < 1 || b * len > (std::int64_t{1} << 30)) {
    throw jit::Error(jit::ErrorCode::InvalidArgument,
                     fmt::format("--equal {}: B and L must be positive, B x L at most 2^30 rows", text));
  }
  return {b, len};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cujit-varlen-bench: ragged (variable-length) prefill against the dense kernel in the same run; "
               "prints every ratio with its bar (issue 19)"};
  bool quick = false, no_mixed = false;
  std::string dtype_name = "bf16";
  std::vector<std::string> equal;
  Heads h;
  app.add_flag("--quick", quick, "one equal-length shape, fewer repetitions");
  app.add_option("--dtype", dtype_name, "f16, bf16, or fp8 (e4m3 q/k/v, bf16 out)")
      ->check(CLI::IsMember({"f16", "bf16", "fp8"}))
      ->capture_default_str();
  app.add_option("--heads-q", h.q, "query heads")->capture_default_str();
  app.add_option("--heads-kv", h.kv, "key/value heads")->capture_default_str();
  app.add_option("--head-dim", h.d, "head dim")->capture_default_str();
  app.add_option("--equal", equal, "equal-length shapes BxL to time instead of the default four (repeatable)");
  app.add_flag("--no-mixed", no_mixed, "leave out the mixed-length batch");
  CLI11_PARSE(app, argc, argv);
  try {
    // Usage errors before the device: they need none.
    std::vector<EqualShape> shapes;
    for (const std::string& text : equal) shapes.push_back(parse_equal_shape(text));
    const jit::Target target = jit::current_target();  // Error(NoDevice) without a GPU
    const Dtypes dtype = dtype_name == "fp8"   ? Dtypes{jit::DType::e4m3, jit::DType::bf16}
                         : dtype_name == "f16" ? Dtypes{jit::DType::f16, jit::DType::f16}
                                               : Dtypes{jit::DType::bf16, jit::DType::bf16};
    fmt::print("device: {} ({}, {} SMs); Hq={} Hkv={} D={} {}\n", target.device_name, target.arch, target.sm_count,
               h.q, h.kv, h.d, dtype_name);
    Tally tally;
    equal_lengths(dtype, h, shapes, quick, tally);
    if (!no_mixed) mixed_lengths(dtype, h, quick, tally);
    double log_sum = 0;
    for (double r : tally.ratios) log_sum += std::log(r);
    fmt::print("\n{} of {} ratios below their bar; geomean ratio {:.3f}\n", tally.misses, tally.ratios.size(),
               std::exp(log_sum / double(tally.ratios.size())));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << tool_message(kTool, e) << "\n";
    return 1;
  }
}
