// cujit-sass: what the compiled variants in a cache turned into. For each
// cubin: registers, spills and local memory, static shared memory, counts of
// the instructions that matter (HGMMA, HMMA, UTMALDG, LDGSTS, ...), the exp2
// that run under a warpgroup's in-flight P V (exp2|P V), with --mix the
// instruction mix of the loop that runs the exp2, and every
// branch classified by what its predicate depends on; a branch on loaded data
// is flagged (attention's control flow should depend only on shapes).
// Runs where cuobjdump (CUDA toolkit) is; --sass reads saved SASS instead;
// --explain prints, for each flagged branch, the instructions that carried the
// data mark from a load to its predicate. A cache entry's "index_params"
// (KernelFamily::index_param_offsets: pointers to lengths and block tables)
// make loads through those parameters indices, not data, and its
// "index_only" (a kernel that reads nothing else) makes every load an index
// (sass/sass_audit.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "autotune/tuner.h"
#include "cache/bounded_json.h"
#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/safe_path.h"
#include "jit/cujit.h"
#include "jit/knobs.h"
#include "sass/sass_audit.h"
#include "tools/tool_message.h"

namespace {

struct Variant {
  std::string name;  // variant name from the cache entry, or the function name
  std::string arch;
  nlohmann::json resources;  // registers, spill bytes, local, static shared
  jit::sass::Audit audit;
  std::vector<int> index_params;  // the cache entry's "index_params", or --index-params with --sass
  int params_align = 8;           // the entry's "params_align", or --params-align
  bool index_only = false;        // the entry's "index_only": it reads no input tensor
};

// Index parameters beyond this offset cannot be in a kernel's parameter struct.
constexpr std::int64_t kMaxParameterBytes = 32764;

// An entry's "index_params": absent is none; anything but a list of offsets
// within a parameter struct is nullopt (the caller then applies none, so a
// bad entry can only make the audit stricter).
std::optional<std::vector<int>> index_params_of(const nlohmann::json& meta) {
  const auto it = meta.find("index_params");
  if (it == meta.end()) return std::vector<int>{};
  if (!it->is_array()) return std::nullopt;
  std::vector<int> out;
  for (const nlohmann::json& offset : *it) {
    if (!offset.is_number_integer()) return std::nullopt;
    const std::int64_t value = offset.get<std::int64_t>();
    if (value < 0 || value >= kMaxParameterBytes) return std::nullopt;
    out.push_back(int(value));
  }
  return out;
}

// An entry's "params_align": absent is 8 (a struct of pointers and ints);
// anything but a power of two up to 256 is nullopt.
std::optional<int> params_align_of(const nlohmann::json& meta) {
  const auto it = meta.find("params_align");
  if (it == meta.end()) return 8;
  if (!it->is_number_integer()) return std::nullopt;
  const std::int64_t value = it->get<std::int64_t>();
  if (value < 1 || value > 256 || (value & (value - 1)) != 0) return std::nullopt;
  return int(value);
}

// An entry's "index_only": true only when it is the JSON true (anything
// else audits the kernel as one that reads data, the stricter reading).
bool index_only_of(const nlohmann::json& meta) {
  const auto it = meta.find("index_only");
  return it != meta.end() && it->is_boolean() && it->get<bool>();
}

std::string run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("could not run " + command);
  std::string out;
  char buffer[65536];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    throw std::runtime_error(fmt::format("`{}` failed (status {}); cujit-sass needs cuobjdump from the CUDA toolkit "
                                         "(on PATH, or give --cuobjdump)",
                                         command, status));
  }
  return out;
}

// "Function f: REG:168 STACK:0 SHARED:0 LOCAL:0 ..." from cuobjdump -res-usage.
nlohmann::json resource_usage(const std::string& text) {
  static const std::regex pattern(R"(REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+))");
  std::smatch m;
  if (!std::regex_search(text, m, pattern)) return nlohmann::json::object();
  return {{"registers", std::stoi(m[1])},
          {"stack_bytes", std::stoi(m[2])},
          {"static_shared_bytes", std::stoi(m[3])},
          {"local_bytes", std::stoi(m[4])}};
}

// A private (0700) directory for the cubin cuobjdump reads, removed at the
// end: no other user can swap the file between our write and its read.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/cujit-sass-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("could not create a temporary directory");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// <variant>.<arch>.sass in DIR: names from the cache's metadata are made one
// safe component (a variant "../x" stays in DIR), and the file is created new
// (O_EXCL | O_NOFOLLOW) after removing what was there, so a link planted at
// the name is removed, never written through.
void save_sass(const jit::cache::DirFd& dir, const Variant& v, const std::string& sass) {
  const std::string name = jit::cache::safe_file_name(fmt::format("{}.{}.sass", v.name, v.arch));
  if (unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    throw std::runtime_error(fmt::format("cannot replace {}: {}", name, std::strerror(errno)));
  }
  jit::cache::write_new_file(dir, name, sass);
}

// One cubin of the cache to disassemble and audit: its variant's fields from
// the entry's metadata, and the cubin.
struct CubinJob {
  Variant variant;
  std::string cubin;
};

// The cache's cubins whose variant name contains `filter`, in the scan's
// order; entries that do not decode are skipped, bad fields reported.
std::vector<CubinJob> cubins_in_cache(const std::string& root, const std::string& filter) {
  std::vector<CubinJob> jobs;
  for (const jit::cache::CacheFile& file : jit::cache::scan_cache(root).files) {
    if (file.kind != jit::cache::CacheFileKind::cubin || !file.regular) continue;
    const auto contents = jit::cache::read_file_with_identity(file.path);
    if (!contents) continue;
    auto entry = jit::cache::CubinStore::decode(jit::cache::entry_hex_name(file.relative), contents->bytes);
    if (!entry) {
      std::cerr << "cujit-sass: skipping " << file.relative << ": not a valid cache entry\n";
      continue;
    }
    // decode refuses an entry whose variant or arch is not a string; numbers
    // of the wrong type read as 0.
    const jit::cache::Field<std::string> variant = jit::cache::string_field(entry->meta, "variant");
    Variant v;
    v.name = variant.state == jit::cache::FieldState::ok ? variant.value : file.relative;
    v.arch = jit::cache::string_field(entry->meta, "arch").value;
    if (!filter.empty() && v.name.find(filter) == std::string::npos) continue;
    const std::optional<std::vector<int>> index_params = index_params_of(entry->meta);
    if (!index_params) {
      std::cerr << "cujit-sass: " << file.relative << ": ignoring index_params (not a list of parameter offsets)\n";
    }
    v.index_params = index_params.value_or(std::vector<int>{});
    const std::optional<int> params_align = params_align_of(entry->meta);
    if (!params_align) {
      std::cerr << "cujit-sass: " << file.relative << ": ignoring index_params (params_align is not a power of two)\n";
      v.index_params.clear();
    }
    v.params_align = params_align.value_or(8);
    v.index_only = index_only_of(entry->meta);
    v.resources["spill_store_bytes"] = jit::cache::integer_field(entry->meta, "spill_store_bytes").value;
    v.resources["spill_load_bytes"] = jit::cache::integer_field(entry->meta, "spill_load_bytes").value;
    jobs.push_back({std::move(v), std::move(entry->payload)});
  }
  return jobs;
}

// What one job gave: a variant per function of the cubin, and the warnings
// to print (in job order, after all are done).
struct CubinResult {
  std::vector<Variant> variants;
  std::string warnings;
};

// cuobjdump on the job's cubin (written to `cubin_path` and removed after),
// then the audit. `save`: where to write the SASS, under `save_lock` (two
// entries may share a variant name and arch).
CubinResult audit_cubin(const CubinJob& job, const std::string& cuobjdump, const std::filesystem::path& cubin_path,
                        const jit::cache::DirFd* save, std::mutex& save_lock) {
  std::ofstream(cubin_path, std::ios::binary | std::ios::trunc) << job.cubin;
  Variant v = job.variant;
  v.resources.update(resource_usage(run_command(fmt::format("{} -res-usage {} 2>&1", cuobjdump, cubin_path.string()))));
  const std::string sass = run_command(fmt::format("{} -sass {} 2>&1", cuobjdump, cubin_path.string()));
  std::filesystem::remove(cubin_path);
  if (save != nullptr) {
    const std::lock_guard<std::mutex> lock(save_lock);
    save_sass(*save, v, sass);
  }
  CubinResult result;
  for (const auto& f : jit::sass::parse_sass(sass)) {
    if (f.instructions.empty()) continue;
    if (!v.index_params.empty() && !jit::sass::parameter_bank_base(f.arch)) {
      result.warnings += fmt::format("cujit-sass: {}: parameters of {} are not located; its index_params are not "
                                     "applied\n",
                                     v.name, f.arch.empty() ? "this arch" : f.arch);
    }
    v.audit = jit::sass::audit_function(f, {v.index_params, v.params_align, v.index_only});
    result.variants.push_back(v);
  }
  return result;
}

// save_dir: when not empty, each variant's SASS is also written there as
// <variant>.<arch>.sass, for reading or for --sass later. `jobs` cubins at a
// time (each a cuobjdump process, then the audit); the result keeps the
// cache scan's order.
std::vector<Variant> variants_in_cache(const std::string& root, const std::string& cuobjdump,
                                       const std::string& filter, const std::string& save_dir, unsigned jobs) {
  const std::vector<CubinJob> work = cubins_in_cache(root, filter);
  const ScratchDir scratch;
  std::optional<jit::cache::DirFd> save;
  if (!save_dir.empty()) save = jit::cache::open_directory(save_dir);
  std::vector<CubinResult> results(work.size());
  std::vector<std::exception_ptr> errors(work.size());
  std::mutex save_lock;
  jit::autotune::parallel_for(work.size(), jobs, [&](std::size_t i) {
    try {
      results[i] = audit_cubin(work[i], cuobjdump, scratch.path() / fmt::format("entry{}.cubin", i),
                               save ? &*save : nullptr, save_lock);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  std::vector<Variant> out;
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    std::cerr << results[i].warnings;
    for (Variant& v : results[i].variants) out.push_back(std::move(v));
  }
  return out;
}

std::vector<Variant> variants_in_files(const std::vector<std::string>& paths, const std::string& filter,
                                       const std::vector<int>& index_params, int params_align) {
  std::vector<Variant> out;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    for (const auto& f : jit::sass::parse_sass(text.str())) {
      if (f.instructions.empty() || (!filter.empty() && f.name.find(filter) == std::string::npos)) continue;
      out.push_back({f.name, f.arch, nlohmann::json::object(),
                     jit::sass::audit_function(f, {index_params, params_align}), index_params, params_align});
    }
  }
  return out;
}

// "exp2 loop 0x46c0-0xa080: 1437 instructions, 6.30 per exp2: FFMA 232, ..."
// with the most frequent opcodes first.
std::string mix_line(const jit::sass::LoopMix& loop) {
  constexpr std::size_t kShown = 12;
  std::vector<std::pair<std::string, int>> by_count(loop.opcodes.begin(), loop.opcodes.end());
  std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string line = fmt::format("exp2 loop 0x{:04x}-0x{:04x}: {} instructions, {:.2f} per exp2:", loop.begin, loop.end,
                                 loop.instructions, double(loop.instructions) / loop.count("MUFU.EX2"));
  for (std::size_t i = 0; i < by_count.size() && i < kShown; ++i)
    line += fmt::format("{} {} {}", i ? "," : "", by_count[i].first, by_count[i].second);
  if (by_count.size() > kShown) line += fmt::format(", {} other opcodes", by_count.size() - kShown);
  return line;
}

void print_table(const std::vector<Variant>& variants, bool explain, bool mix) {
  fmt::print("{:58} {:>4} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>7} {:>7} {:>6} {:>4} {:>4} {:>8} {:>5} {:>9}\n",
             "variant", "regs", "spill", "local", "shared", "HGMMA", "QGMMA", "HMMA", "UTMALDG", "UTMASTG", "LDGSTS",
             "LDL", "STL", "branches", "data", "exp2|P V");
  for (const Variant& v : variants) {
    const auto& c = v.audit.counts;
    const auto& r = v.resources;
    fmt::print("{:58} {:>4} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>7} {:>7} {:>6} {:>4} {:>4} {:>8} {:>5} {:>9}\n",
               v.name, r.value("registers", -1), r.value("spill_store_bytes", 0) + r.value("spill_load_bytes", 0),
               r.value("local_bytes", 0), r.value("static_shared_bytes", 0), c.at("HGMMA"), c.at("QGMMA"), c.at("HMMA"),
               c.at("UTMALDG"), c.at("UTMASTG"), c.at("LDGSTS"), c.at("LDL"), c.at("STL"), v.audit.branches.size(),
               v.audit.data_branches(), v.audit.exp2_under_wgmma);
    if (mix && v.audit.exp2_loop) fmt::print("    {}\n", mix_line(*v.audit.exp2_loop));
    for (const auto& b : v.audit.branches) {
      if (b.kind == jit::sass::BranchKind::data || b.kind == jit::sass::BranchKind::indirect) {
        fmt::print("    {} branch at 0x{:04x}: {}\n", jit::sass::to_string(b.kind), b.address, b.text);
        if (!explain) continue;
        for (const auto& step : b.chain) {
          fmt::print("        0x{:04x}  {:60} {}\n", step.address, step.text,
                     step.via.empty() ? std::string("<- mark starts here") : "<- via " + step.via);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cujit-sass: instruction counts and a branch audit of the compiled variants in the cache"};
  std::string cache_dir;
  std::vector<std::string> sass_files;
  std::string filter;
  std::string cuobjdump = "cuobjdump";
  std::string save_dir;
  std::vector<int> index_params;
  int params_align = 8;
  bool json = false;
  bool strict = false;
  bool explain = false;
  bool mix = false;
  unsigned jobs = jit::detail::usable_cpus();
  app.add_option("--cache", cache_dir, "cache root (default: CUJIT_CACHE_DIR or the default cache)");
  CLI::Option* sass_option =
      app.add_option("--sass", sass_files, "read saved `cuobjdump -sass` output instead of the cache (repeatable)");
  app.add_option("--variant", filter, "only variants whose name contains this");
  app.add_option("--cuobjdump", cuobjdump, "the cuobjdump to run");
  app.add_option("--jobs", jobs, "cubins disassembled and audited at a time (default: the CPUs)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--save-sass", save_dir, "also write each variant's SASS to DIR/<variant>.<arch>.sass")
      ->check(CLI::ExistingDirectory);
  app.add_option("--index-params", index_params,
                 "with --sass: byte offsets in the parameter struct of pointers to index metadata (lengths, block "
                 "tables), comma-separated, as the cache records them (the decode kernel's: 152,136)")
      ->delimiter(',')
      ->check(CLI::Range(0, int(kMaxParameterBytes) - 1))
      ->needs(sass_option);
  app.add_option("--params-align", params_align,
                 "with --sass: the parameter struct's alignment, as the cache records it (64 for the sm90 "
                 "family's struct of TMA descriptors): it starts at the parameter bank's base rounded up to it")
      ->check(CLI::IsMember({1, 2, 4, 8, 16, 32, 64, 128, 256}))
      ->needs(sass_option);
  app.add_flag("--json", json, "one JSON array on stdout instead of the table");
  app.add_flag("--strict", strict,
               "exit 1 when any branch depends on loaded data, printing each such branch's chain (as --explain)");
  app.add_flag("--explain", explain,
               "for each data branch, the chain of instructions that carried the mark from a load to its predicate");
  app.add_flag("--mix", mix,
               "under each variant, the instructions of its innermost loop that runs exp2 (the softmax's main "
               "loop) by opcode, and their number per exp2 (the JSON has them as exp2_loop)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<Variant> variants =
        sass_files.empty() ? variants_in_cache(cache_dir.empty() ? jit::cache_directory() : cache_dir, cuobjdump, filter,
                                                 save_dir, jobs)
                           : variants_in_files(sass_files, filter, index_params, params_align);
    int flagged = 0;
    for (const Variant& v : variants) flagged += v.audit.data_branches();
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const Variant& v : variants) {
        nlohmann::json j = jit::sass::to_json(v.audit, explain);
        j["variant"] = v.name;
        j["arch"] = v.arch;
        j["resources"] = v.resources;
        j["index_params"] = v.index_params;
        if (v.index_only) j["index_only"] = true;
        out.push_back(j);
      }
      std::cout << out.dump(2) << "\n";
    } else {
      // A failing --strict run says why: a log's tail then holds the chains.
      print_table(variants, explain || strict, mix);
      fmt::print("{} variants, {} data-dependent branches\n", variants.size(), flagged);
    }
    return strict && flagged > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << tool_message("cujit-sass", e) << "\n";
    return 2;
  }
}
