#include "jit/binary_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/cubin_store.h"
#include "cache/eviction.h"
#include "cache/sha256.h"
#include "jit/error.h"
#include "jit/log.h"
#include "jit/repro_bundle.h"
#include "jit/runtime_state.h"

namespace jit::detail {

namespace {

// The names in a file's quoted #include lines (angle includes are NVRTC's
// own headers). A commented-out include is taken too: the closure may be
// larger than what the compiler reads, never smaller.
std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> names;
  auto skip_blanks = [&](std::size_t i) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    return i;
  };
  for (std::size_t line = 0; line < text.size();) {
    const std::size_t end = std::min(text.find('\n', line), text.size());
    std::size_t i = skip_blanks(line);
    if (i < end && text[i] == '#') {
      i = skip_blanks(i + 1);
      if (text.compare(i, 7, "include") == 0) {
        i = skip_blanks(i + 7);
        const std::size_t close = i < end && text[i] == '"' ? text.find('"', i + 1) : std::string_view::npos;
        if (close < end) names.emplace_back(text.substr(i + 1, close - i - 1));
      }
    }
    line = end + 1;
  }
  return names;
}

// The names of the files reached from the entry through quoted #includes,
// each once (repeated and cyclic includes end), or nullopt when an include
// names none of the files.
std::optional<std::set<std::string>> include_closure(const KernelSources& sources) {
  std::map<std::string_view, std::string_view> by_name;
  for (const auto& [name, text] : sources.files) by_name.emplace(name, text);
  std::set<std::string> reached;
  std::vector<std::string> pending = {sources.entry};
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    const auto file = by_name.find(name);
    if (file == by_name.end() || !reached.insert(name).second) continue;  // a missing entry is NVRTC's error
    for (const std::string& include : quoted_includes(file->second)) {
      // NVRTC matches a header by the name as written; a name relative to
      // the including file's folder is followed too, where one exists.
      const std::string relative =
          (std::filesystem::path(name).parent_path() / include).lexically_normal().generic_string();
      const bool as_written = by_name.count(include) != 0, as_relative = by_name.count(relative) != 0;
      if (!as_written && !as_relative) return std::nullopt;
      if (as_written) pending.push_back(include);
      if (as_relative) pending.push_back(relative);
    }
  }
  return reached;
}

}  // namespace

std::string binary_cache_key(const CompileRequest& request) {
  // Only what the entry can include: editing one family's kernel leaves the
  // other families' cubins valid. An include found in none of the files may
  // resolve in a way this scan does not model (an -I option, a name NVRTC
  // normalizes otherwise): then every file counts, as a key must never miss
  // a file that the compile reads.
  const std::optional<std::set<std::string>> closure = include_closure(*request.sources);
  Json files = Json::array();
  for (const auto& [name, text] : request.sources->files) {
    if (!closure || closure->count(name) != 0) files.push_back({name, cache::sha256_hex(text)});
  }
  const Json key = {
      {"format", cache::kCubinFormatVersion}, {"cujit", cujit_version()},       {"nvrtc", nvrtc_version()},
      {"arch", request.arch},                 {"entry", request.sources->entry}, {"files", files},
      {"name", request.name_expression},      {"options", nvrtc_options(request)},
  };
  return cache::sha256_hex(key.dump());
}

namespace {

// On an NVRTC failure: the sources, options and log in a bundle under the
// cache (jit/repro_bundle.h), so the failure can be replayed outside the
// process. Returns the directory, or "" when it cannot be written.
std::string repro_bundle_for(const CompileRequest& request, const std::string& variant, const std::string& log) {
  const auto& root = cache_root();
  if (!root) return "";
  try {
    return write_repro_bundle(*root, request, variant, log).string();
  } catch (const std::exception&) {
    return "";
  }
}

// A metadata field as a string or an int, or `fallback` when it is missing or
// of another type (json::value would throw for the latter).
std::string meta_string(const Json& meta, const char* field) {
  const auto it = meta.find(field);
  return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int meta_int(const Json& meta, const char* field, int fallback) {
  const auto it = meta.find(field);
  return it != meta.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

// Why a decoded entry may not serve this request ("" when it may). The key
// already covers arch and variant, so a mismatch means an entry written for
// something else (copied, or re-keyed by hand): a miss, recompiled and replaced.
std::string entry_mismatch(const Json& meta, const std::string& variant, const std::string& arch) {
  const std::string entry_arch = meta_string(meta, "arch");
  if (entry_arch != arch) return fmt::format("its arch is '{}', not {}", entry_arch, arch);
  const std::string entry_variant = meta_string(meta, "variant");
  if (entry_variant != variant) return fmt::format("its variant is '{}', not {}", entry_variant, variant);
  if (meta_string(meta, "lowered_name").empty()) return "it has no lowered kernel name";
  return "";
}

// Threads of this process that need the same key take turns: the first
// compiles and stores, the others then find the entry on disk. So a process
// compiles each key at most once while the disk cache works. (Processes do
// not coordinate: two may compile one key at the same time, and the last
// rename wins; both entries are the same binary.)
std::shared_ptr<std::mutex> key_mutex(const std::string& key) {
  static std::mutex mutex;
  static auto* table = new std::unordered_map<std::string, std::weak_ptr<std::mutex>>();
  std::lock_guard lock(mutex);
  if (table->size() > 4096) std::erase_if(*table, [](const auto& slot) { return slot.second.expired(); });
  std::weak_ptr<std::mutex>& slot = (*table)[key];
  std::shared_ptr<std::mutex> held = slot.lock();
  if (!held) {
    held = std::make_shared<std::mutex>();
    slot = held;
  }
  return held;
}

// A store that fails after the root was fine (disk full, I/O error,
// permissions changed, a file where a directory should be) costs the next
// process a compile, never this call: said once per process at info level,
// then at debug level.
void report_store_failure(const std::string& variant, const std::string& arch, const std::string& why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    log_info("could not store {} for {} in the disk cache, using it from memory (later store failures are logged "
             "at debug level): {}",
             variant, arch, why);
  } else {
    log_debug("could not store {} for {} in the disk cache: {}", variant, arch, why);
  }
}

// Step 1: the disk cache. True (and `out` filled) on a hit; an entry that
// does not match what is asked for is a miss. A read-only root is only read:
// no last-use mark, no removal; what it holds but may not serve is logged,
// and the caller goes on to the next root.
bool load_cached(const cache::TrustedDir& root, const std::string& key, VariantBinary& out) {
  const cache::CubinStore store(root);
  auto skipped_in_read_only_root = [&](const std::string& why) {
    log_info("skipped {} in read-only cache root {} ({} for {}): {}", store.entry_path(key).string(),
             root.path().string(), out.variant, out.arch, why);
  };
  std::string problem;
  auto entry = store.load(key, &problem);
  if (!entry) {
    if (root.read_only() && !problem.empty()) skipped_in_read_only_root(problem);
    return false;
  }
  const Json& meta = entry->meta;
  if (const std::string why = entry_mismatch(meta, out.variant, out.arch); !why.empty()) {
    if (root.read_only()) {
      skipped_in_read_only_root(why);
    } else {
      log_debug("disk cache entry {} is a miss for {} ({}): {}; recompiling", key, out.variant, out.arch, why);
    }
    return false;
  }
  out.cubin = std::move(entry->payload);
  out.lowered_name = meta_string(meta, "lowered_name");
  out.usage.registers = meta_int(meta, "registers", -1);
  out.usage.spill_store_bytes = meta_int(meta, "spill_store_bytes", 0);
  out.usage.spill_load_bytes = meta_int(meta, "spill_load_bytes", 0);
  out.usage.stack_bytes = meta_int(meta, "stack_bytes", 0);
  out.usage.wgmma_serialized = meta_int(meta, "wgmma_serialized", 0) != 0;
  out.from_cache = true;
  ++counters().disk_cache_hits;
  // The last use LRU eviction goes by; a read-only root is never evicted.
  if (!root.read_only()) cache::touch_entry(store.entry_path(key));
  log_debug("disk cache hit: {} for {}{}", out.variant, out.arch,
            root.read_only() ? " in read-only root " + root.path().string() : std::string());
  return true;
}

// Steps 1 over every root: the writable one, then each read-only one in
// order. A hit in a read-only root is served from there and not copied into
// the writable root: the read-only root serves every later process as well.
bool load_from_any_root(const std::string& key, VariantBinary& out) {
  try {
    if (cache_root() && load_cached(*cache_root_dir(), key, out)) return true;
    for (const cache::TrustedDir& root : read_only_cache_roots()) {
      if (load_cached(root, key, out)) return true;
    }
  } catch (const cache::UntrustedCacheDir& e) {
    throw Error(ErrorCode::Cache, e.what());  // a directory of a read-only root others can change
  }
  return false;
}

// Step 2: NVRTC. A compile error comes with a repro bundle when one could be written.
void compile(const CompileRequest& request, VariantBinary& out) {
  log_info("compiling {} for {} with NVRTC", out.variant, out.arch);
  const auto start = std::chrono::steady_clock::now();
  CompiledBinary compiled;
  try {
    compiled = nvrtc_compile(request);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Compile) throw;
    const std::string bundle = repro_bundle_for(request, out.variant, e.what());
    if (bundle.empty()) throw;
    throw Error(ErrorCode::Compile, fmt::format("{}\nrepro bundle (sources, options, log): {}", e.what(), bundle));
  }
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++counters().nvrtc_compiles;
  out.cubin = std::move(compiled.cubin);
  out.lowered_name = std::move(compiled.lowered_name);
  out.usage = compiled.usage;
  log_debug("compiled {} for {} in {:.2f} s: {} registers, {} bytes spilled", out.variant, out.arch,
            out.compile_seconds, out.usage.registers, out.usage.spill_bytes());
  if (out.usage.wgmma_serialized) {
    log_info("ptxas serialized the wgmma of {} for {} (C7512/C7515): it will run, without overlapping its matrix products",
             out.variant, out.arch);
  }
}

// Step 3: the disk cache again. A failed store costs a later process a
// compile, never this call; then the cache is kept under its size bound.
void publish(const cache::TrustedDir& root, const std::string& key, const VariantBinary& out, const Json& meta) {
  try {
    cache::CubinStore(root).store(key, out.cubin, meta);
  } catch (const cache::UntrustedCacheDir& e) {
    throw Error(ErrorCode::Cache, e.what());  // a security problem, not a full disk
  } catch (const cache::CacheError& e) {
    report_store_failure(out.variant, out.arch, e.what());
    return;
  }
  // Keep the cache under CUJIT_CACHE_MAX_BYTES (sparing this entry); a
  // failure here never fails the call.
  try {
    cache::EvictionOptions evict;
    evict.keep.push_back(cache::CubinStore(root).entry_path(key));
    const cache::EvictionReport r = cache::evict_lru(root.path(), knobs().cache_max_bytes, evict);
    if (r.evicted || r.removed_temps > 0) {
      log_info("cache eviction (bound {} bytes): removed {} least-recently-used cubins, {} tuning records, {} "
               "stale temp files ({} bytes); {} bytes left",
               knobs().cache_max_bytes, r.removed_cubins, r.removed_tuning, r.removed_temps, r.removed_bytes,
               r.bytes_after);
    }
  } catch (const std::exception& e) {
    log_info("cache eviction skipped: {}", e.what());
  }
}

CompileRequest request_of(const KernelFamily& family, const Json& spec, const Json& config, const std::string& arch) {
  return CompileRequest{&family.sources(), family.name_expression(spec, config), arch,
                        family.compile_options(spec, config)};
}

}  // namespace

std::filesystem::path cached_entry_path(const KernelFamily& family, const Json& spec, const Json& config,
                                        const std::string& arch) {
  const auto& root = cache_root();
  const std::string key = binary_cache_key(request_of(family, spec, config, arch));
  // Where a lookup finds it: the writable root, else the first read-only root
  // that has it (a warm-up served from there left nothing in the writable one).
  const std::filesystem::path writable = root ? cache::CubinStore(*root).entry_path(key) : std::filesystem::path();
  std::error_code error;
  if (!writable.empty() && std::filesystem::exists(writable, error)) return writable;
  for (const cache::TrustedDir& read_only : read_only_cache_roots()) {
    const std::filesystem::path path = cache::CubinStore(read_only).entry_path(key);
    if (std::filesystem::exists(path, error)) return path;
  }
  return writable;
}

VariantBinary obtain_binary(const KernelFamily& family, const Json& spec, const Json& config, const std::string& arch,
                            CompilePolicy policy) {
  const CompileRequest request = request_of(family, spec, config, arch);
  VariantBinary out;
  out.variant = family.variant_name(spec, config);
  out.arch = arch;
  const auto& root = cache_root();
  const std::string key = binary_cache_key(request);
  // One compile per key at a time in this process: the others wait, then find
  // it in the cache. Another process may compile the same key meanwhile; each
  // store is an atomic rename of identical content.
  const std::shared_ptr<std::mutex> key_lock = key_mutex(key);
  std::lock_guard key_guard(*key_lock);
  if (load_from_any_root(key, out)) return out;
  if (policy == CompilePolicy::forbid) {
    std::string where = root ? " at " + root->string() : " (no writable disk cache)";
    for (const cache::TrustedDir& read_only : read_only_cache_roots()) where += " nor at " + read_only.path().string();
    throw Error(ErrorCode::Unsupported,
                fmt::format("CUJIT_AUTOTUNE=frozen forbids compiling, and {} for {} is not in the cache{}: fill it "
                            "first with cujit-warmup --arch {} (or unset CUJIT_AUTOTUNE)",
                            out.variant, arch, where, arch));
  }
  compile(request, out);
  if (root) {
    Json meta = {
        {"variant", out.variant},
        {"family", family.name()},
        {"arch", arch},
        {"lowered_name", out.lowered_name},
        {"registers", out.usage.registers},
        {"spill_store_bytes", out.usage.spill_store_bytes},
        {"spill_load_bytes", out.usage.spill_load_bytes},
        {"stack_bytes", out.usage.stack_bytes},
        {"wgmma_serialized", int(out.usage.wgmma_serialized)},
        {"spec", spec},
        {"config", config},
    };
    // What cujit-sass's audit reads as index pointers; absent means none.
    if (const std::vector<int> index_params = family.index_param_offsets(spec, config); !index_params.empty()) {
      meta["index_params"] = index_params;
      meta["params_align"] = family.params_alignment(spec, config);
    }
    if (family.reads_only_index_data(spec, config)) meta["index_only"] = true;
    publish(*cache_root_dir(), key, out, meta);
  }
  return out;
}

}  // namespace jit::detail
