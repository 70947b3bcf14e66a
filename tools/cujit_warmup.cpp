// cujit-warmup: fills the cache ahead of time. Compiles every variant the
// given shapes need for the given archs (no GPU needed); on a GPU whose arch
// is among them, also tunes each shape.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>

#include "jit/cujit.h"
#include "jit/knobs.h"
#include "jit/warmup.h"
#include "tools/arch_list.h"
#include "tools/tool_message.h"
#include "tools/warmup_progress.h"

namespace {

constexpr const char* kManifestHelp = R"(Manifest (--manifest FILE): a JSON object with a "shapes" array, e.g.
  {"shapes": [{"seq": 4096, "head_dim": 128, "dtype": "bf16", "causal": true},
              {"batch": 2, "heads": 8, "seq": 1024, "head_dim": 64}]}
Each entry's keys, and their defaults:
  seq       sequence length (required)
  head_dim  64, 128, or 256 on sm_90a (required)
  batch     1
  heads     16
  dtype     "fp16" (or "bf16")
  causal    false
  varlen    false (true: a ragged batch of `batch` sequences of `seq` rows)
  qkv_dtype dtype ("fp8" or "e4m3": q, k and v in e4m3, out in dtype; sm_89 or
            newer; not with kv_cache)
  kv_cache  false (true: attention over a KV cache, jit::plan_kv_attention;
            `seq` is max_seq_k, `heads` the query heads, causal defaults to true)
With "kv_cache": true only (--all lists no KV-cache variants):
  new_rows  1 (query rows per sequence: 1 for decode, up to 16 speculative)
  heads_kv  heads (a divisor of heads)
  page_size 0 (a contiguous cache; else 1..256 keys per page)
  kv_dtype  dtype ("fp8" or "e4m3": an FP8 cache, sm_89 or newer; "e5m2")
  head_major false (true: the cache is [B, Hkv, S, D] or [pages, Hkv, page_size, D],
            KvAttentionShape::token_major = false)
  descale_per_page false (true: a paged FP8 cache's descale factors per page,
            KvAttentionShape::descale_per_page)
  e.g. {"kv_cache": true, "heads": 32, "heads_kv": 8, "seq": 8192, "head_dim": 128,
        "dtype": "bf16", "page_size": 16, "kv_dtype": "fp8"}
Any other key is an error. batch, heads, seq and new_rows only matter for
tuning on a GPU, except that new_rows * heads / heads_kv picks the decode variant.
)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cujit-warmup: compile (and, on a GPU, tune) attention variants into the cache"};
  app.footer(kManifestHelp);
  std::string archs_text = "sm_90a,sm_89";
  std::vector<std::string> shape_texts;
  std::string manifest_path;
  std::string qkv_dtype;
  bool all = false, json = false, no_tune = false;
  unsigned threads = jit::detail::usable_cpus();
  app.add_option("--arch", archs_text, "comma-separated targets, e.g. sm_90a,sm_89,sm_80 (H100/H200: sm_90a)")
      ->capture_default_str();
  app.add_option("--shape", shape_texts, "B,H,S,D,dtype,causal, e.g. 1,16,1024,64,fp16,0 (repeatable)");
  app.add_option("--qkv-dtype", qkv_dtype,
                 "fp8 (or e4m3): q, k and v of every --shape in e4m3, out in the shape's dtype (sm_89 or newer); "
                 "default: the shape's dtype")
      ->check(CLI::IsMember({"fp8", "e4m3"}));
  app.add_option("--manifest", manifest_path, "JSON file of shapes (see below)");
  app.add_flag("--all", all,
               "compile the whole shipped config space (every head dim, dtype, causal, dense and ragged; FP8 q, k "
               "and v too where the arch has FP8 tensor cores)");
  app.add_flag("--no-tune", no_tune, "compile only, even on a GPU");
  app.add_option("--threads", threads, "parallel NVRTC compiles (at least 1)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  app.add_flag("--json", json, "print the summary as one JSON object");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<std::string> archs = split_archs(archs_text);
    if (archs.empty()) {
      fmt::print(stderr, "cujit-warmup: --arch '{}' names no arch; give e.g. --arch sm_90a,sm_89\n", archs_text);
      return 2;
    }
    // sm_90 is a valid target (the portable family), but an H100 or H200
    // reports sm_90a and runs the sm90 family: sm_90 variants go unused there.
    if (std::count(archs.begin(), archs.end(), "sm_90") && !std::count(archs.begin(), archs.end(), "sm_90a")) {
      fmt::print(stderr,
                 "cujit-warmup: warning: an H100 or H200 is sm_90a, which never uses sm_90 variants; for those "
                 "GPUs give --arch sm_90a\n");
    }
    std::vector<jit::AttentionShape> shapes;
    for (const auto& text : shape_texts) {
      shapes.push_back(jit::parse_attention_shape(text));
      shapes.back().fp8_qkv = !qkv_dtype.empty();
    }
    if (!manifest_path.empty()) {
      const auto listed = jit::read_attention_manifest(manifest_path);
      if (listed.empty()) {
        fmt::print(stderr, "cujit-warmup: manifest {} has no shapes (its \"shapes\" array is empty)\n", manifest_path);
        return 2;
      }
      shapes.insert(shapes.end(), listed.begin(), listed.end());
    }
    if (!qkv_dtype.empty() && shape_texts.empty()) {
      std::cerr << "cujit-warmup: --qkv-dtype applies to --shape, and none is given; a manifest entry takes "
                   "\"qkv_dtype\": \"fp8\", and --all lists FP8 shapes already\n";
      return 2;
    }
    if (shapes.empty() && !all) {
      std::cerr << "cujit-warmup: nothing to do: give --shape, --manifest or --all\n";
      return 2;
    }
    const jit::WarmupProgress progress = json ? jit::WarmupProgress{} : warmup_progress("cujit-warmup");
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
      summary.not_kept += one.not_kept;
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
    // Evicted as soon as stored: a later process would compile these again.
    std::string not_kept_note;
    if (summary.not_kept > 0) {
      not_kept_note = fmt::format(
          "{} of {} variants did not stay in the cache: CUJIT_CACHE_MAX_BYTES ({} bytes) is smaller than the set; "
          "raise it (a rerun would compile them again)",
          summary.not_kept, summary.compiled + summary.cached, jit::detail::knobs().cache_max_bytes);
    }
    if (json) {
      jit::Json out = {{"compiled", summary.compiled}, {"cached", summary.cached}, {"failed", summary.failed},
                       {"not_kept", summary.not_kept}, {"tuned", summary.tuned},   {"seconds", summary.seconds},
                       {"archs", archs},               {"errors", summary.errors}};
      if (!tune_note.empty()) out["note"] = tune_note;
      if (!not_kept_note.empty()) out["not_kept_note"] = not_kept_note;
      std::cout << out.dump() << "\n";
    } else {
      fmt::print("cujit-warmup: {} compiled, {} already cached, {} failed, {} shapes tuned, {:.1f} s ({})\n",
                 summary.compiled, summary.cached, summary.failed, summary.tuned, summary.seconds,
                 fmt::join(archs, ", "));
      for (const auto& e : summary.errors) fmt::print(stderr, "  {}\n", e);
      if (!tune_note.empty()) fmt::print("{}\n", tune_note);
      if (!not_kept_note.empty()) fmt::print(stderr, "cujit-warmup: {}\n", not_kept_note);
    }
    return summary.failed == 0 && summary.not_kept == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << tool_message("cujit-warmup", e) << "\n";
    return 1;
  }
}
