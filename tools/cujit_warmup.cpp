// cujit-warmup: fills the cache ahead of time. Compiles every variant the
// given shapes need for the given archs (no GPU needed); on a GPU whose arch
// is among them, also tunes each shape.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "jit/cujit.h"
#include "jit/knobs.h"
#include "jit/warmup.h"

int main(int argc, char** argv) {
  CLI::App app{"cujit-warmup: compile (and, on a GPU, tune) attention variants into the cache"};
  std::string archs_text = "sm_90a,sm_89";
  std::vector<std::string> shape_texts;
  std::string manifest_path;
  bool all = false, json = false, no_tune = false;
  unsigned threads = jit::detail::usable_cpus();
  app.add_option("--arch", archs_text, "comma-separated targets, e.g. sm_90a,sm_89,sm_80")->capture_default_str();
  app.add_option("--shape", shape_texts, "B,H,S,D,dtype,causal, e.g. 1,16,1024,64,fp16,0 (repeatable)");
  app.add_option("--manifest", manifest_path, "JSON file: {\"shapes\": [{\"seq\":..,\"head_dim\":..}, ...]}");
  app.add_flag("--all", all, "compile the whole shipped config space (every head dim, dtype, causal)");
  app.add_flag("--no-tune", no_tune, "compile only, even on a GPU");
  app.add_option("--threads", threads, "parallel NVRTC compiles")->capture_default_str();
  app.add_flag("--json", json, "print the summary as one JSON object");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<std::string> archs;
    std::stringstream arch_stream(archs_text);
    for (std::string arch; std::getline(arch_stream, arch, ',');)
      if (!arch.empty()) archs.push_back(arch);
    std::vector<jit::AttentionShape> shapes;
    for (const auto& text : shape_texts) shapes.push_back(jit::parse_attention_shape(text));
    if (!manifest_path.empty()) {
      std::ifstream file(manifest_path);
      if (!file) throw jit::Error(jit::ErrorCode::InvalidArgument, "cannot read manifest " + manifest_path);
      std::stringstream text;
      text << file.rdbuf();
      for (const auto& s : jit::parse_attention_manifest(text.str())) shapes.push_back(s);
    }
    if (shapes.empty() && !all) {
      std::cerr << "cujit-warmup: nothing to do: give --shape, --manifest or --all\n";
      return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto progress = [&](const jit::CompileReport& r, std::size_t done, std::size_t total) {
      if (json) return;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double eta = elapsed / double(done) * double(total - done);
      fmt::print(stderr, "\r[{}/{}] ETA {:.0f} s  {} {} {}\033[K", done, total, eta, r.arch, r.variant,
                 r.from_cache ? "(cached)" : "");
      if (done == total) fmt::print(stderr, "\n");
    };
    // With --all each arch gets the specializations its families serve there
    // (head dim 256 only where the sm90 family runs).
    jit::WarmupSummary summary;
    std::vector<jit::AttentionShape> tuned_shapes = shapes;
    for (const std::string& arch : archs) {
      std::vector<jit::AttentionShape> arch_shapes = shapes;
      if (all) {
        const auto more = jit::all_attention_specializations(arch);
        arch_shapes.insert(arch_shapes.end(), more.begin(), more.end());
        if (jit::gpu_present() && jit::current_target().arch == arch) tuned_shapes = arch_shapes;
      }
      const jit::WarmupSummary one = jit::warm_up_attention({arch}, arch_shapes, threads, progress);
      summary.compiled += one.compiled;
      summary.cached += one.cached;
      summary.failed += one.failed;
      summary.seconds += one.seconds;
      summary.errors.insert(summary.errors.end(), one.errors.begin(), one.errors.end());
    }
    std::string tune_note;
    if (!no_tune && jit::gpu_present()) {
      const std::string arch = jit::current_target().arch;
      if (std::find(archs.begin(), archs.end(), arch) != archs.end()) {
        jit::tune_attention_shapes(tuned_shapes, summary);
      } else {
        tune_note = fmt::format("not tuned: this GPU is {}, not among --arch", arch);
      }
    } else if (!no_tune) {
      tune_note = "not tuned: no GPU here (compiled only; tuning happens on the first call on the GPU)";
    }
    if (json) {
      jit::Json out = {{"compiled", summary.compiled}, {"cached", summary.cached}, {"failed", summary.failed},
                       {"tuned", summary.tuned},       {"seconds", summary.seconds}, {"archs", archs},
                       {"errors", summary.errors}};
      if (!tune_note.empty()) out["note"] = tune_note;
      std::cout << out.dump() << "\n";
    } else {
      fmt::print("cujit-warmup: {} compiled, {} already cached, {} failed, {} shapes tuned, {:.1f} s ({})\n",
                 summary.compiled, summary.cached, summary.failed, summary.tuned, summary.seconds,
                 fmt::join(archs, ", "));
      for (const auto& e : summary.errors) fmt::print(stderr, "  {}\n", e);
      if (!tune_note.empty()) fmt::print("{}\n", tune_note);
    }
    return summary.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
