// cujit-cache: lists, summarizes, verifies, prunes, clears, exports and
// imports the disk cache (--dir, else the directory cujit itself uses).
//
//   cujit-cache ls [--json]          every cubin entry: variant, arch, size, last use
//   cujit-cache stats [--json]       entries, bytes, tuning records, by arch
//   cujit-cache tuning [--family F] [--top N] [--json]
//                                    each tuning record's candidates, fastest first, the pick marked
//   cujit-cache verify [--json]      check every entry; remove bad ones; exit 1 if any
//   cujit-cache prune --max-bytes N  least-recently-used eviction down to 90% of N
//   cujit-cache clear                remove every entry and tuning record
//   cujit-cache export [--sign KEY.pem] FILE
//                                    the whole cache in one archive (signed with an Ed25519 key)
//   cujit-cache import [--replace] [--trusted-key PUB.pem]... FILE
//                                    verify an archive (and its signature when trusted keys are
//                                    given here or in CUJIT_CACHE_TRUSTED_KEYS), then publish its entries
// --dir is checked as cujit checks its own cache (docs/security.md); a
// directory under it that is not trusted is reported by ls, stats, tuning
// and verify and refused by the rest.
// Without --dir, ls, stats, tuning and verify also show each pre-warmed root of
// CUJIT_CACHE_READONLY_DIRS, marked read-only; verify only reads those. No
// command changes a read-only root: prune, clear, import and export act on
// the writable root alone and refuse a --dir that names a read-only one.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/archive.h"
#include "cache/bounded_json.h"
#include "cache/cache_dir.h"
#include "cache/cache_scan.h"
#include "cache/trusted_dir.h"
#include "cache/eviction.h"
#include "cache/maintenance.h"
#include "jit/cujit.h"
#include "jit/knobs.h"
#include "jit/runtime_state.h"
#include "tools/tool_message.h"
#include "tools/tuning_listing.h"

namespace {

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string local_time(std::int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  if (::localtime_r(&t, &tm) == nullptr) return "?";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Every directory below the root that failed the trust check (ls, stats).
void print_untrusted(const std::vector<jit::cache::UntrustedSubtree>& untrusted) {
  for (const auto& u : untrusted) fmt::print(stderr, "untrusted, not listed: {}/: {}\n", u.relative, u.reason);
}

// A cache root a command works on, and whether it is one of
// CUJIT_CACHE_READONLY_DIRS (checked by the read-only root's rules, never changed).
struct Root {
  std::string path;
  jit::cache::RootAccess access = jit::cache::RootAccess::writable;
  bool read_only() const { return access == jit::cache::RootAccess::read_only; }
};

bool same_directory(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code error;
  return std::filesystem::equivalent(a, b, error);
}

bool is_read_only_root(const std::string& dir) {
  const auto& listed = jit::detail::knobs().cache_read_only_dirs;
  return std::any_of(listed.begin(), listed.end(), [&](const auto& r) { return same_directory(r, dir); });
}

Root resolve_dir(const std::string& dir) {
  if (!dir.empty()) {
    // A typo must not read as an empty cache (nor export an empty archive).
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      throw jit::Error(jit::ErrorCode::InvalidArgument,
                       std::filesystem::exists(dir, error)
                           ? fmt::format("--dir {} is not a directory", dir)
                           : fmt::format("--dir {} does not exist (to import into a new cache, create it first: "
                                         "mkdir -m 700 {})",
                                         dir, dir));
    }
    // The same check as cujit's own roots: a symlink or a group/other-writable
    // mode is refused, and so is another owner unless it is a read-only root.
    const Root root{dir, is_read_only_root(dir) ? jit::cache::RootAccess::read_only : jit::cache::RootAccess::writable};
    (void)jit::cache::TrustedDir::open_existing_root(dir, root.access);
    return root;
  }
  const std::string d = jit::cache_directory();
  if (d.empty()) {
    throw jit::Error(jit::ErrorCode::InvalidArgument,
                     fmt::format("there is no disk cache ({}){}; or pass --dir DIR", jit::cache_status(),
                                 jit::detail::no_disk_cache_fix()));
  }
  return Root{d};
}

// What ls, stats and verify show: --dir alone, or the writable root (when
// there is one) and then each read-only root that can be opened; a read-only
// root that cannot is said on stderr, and `refused` counts the untrusted ones.
std::vector<Root> roots_to_show(const std::string& dir, int& refused) {
  if (!dir.empty()) return {resolve_dir(dir)};
  std::vector<Root> roots;
  if (const std::string d = jit::cache_directory(); !d.empty()) roots.push_back(Root{d});
  for (const std::filesystem::path& r : jit::detail::knobs().cache_read_only_dirs) {
    try {
      (void)jit::cache::TrustedDir::open_read_only_root(r);
      roots.push_back(Root{r.string(), jit::cache::RootAccess::read_only});
    } catch (const jit::cache::UntrustedCacheDir& e) {
      fmt::print(stderr, "cujit-cache: refused read-only root: {}\n", e.what());
      ++refused;
    } catch (const jit::cache::CacheError& e) {
      fmt::print(stderr, "cujit-cache: read-only root left out: {}\n", e.what());
    }
  }
  if (roots.empty() && refused == 0) (void)resolve_dir(dir);  // says why there is nothing
  return roots;
}

// The one root prune, clear, import and export act on: never a read-only one.
std::string writable_root(const std::string& dir, const std::string& command) {
  const Root root = resolve_dir(dir);
  if (root.read_only()) {
    throw jit::Error(jit::ErrorCode::InvalidArgument,
                     fmt::format("{} is a read-only cache root (CUJIT_CACHE_READONLY_DIRS), which cujit-cache {} "
                                 "never touches; to rebuild it, run without CUJIT_CACHE_READONLY_DIRS where it is "
                                 "writable: CUJIT_CACHE_READONLY_DIRS= cujit-cache --dir {} {}",
                                 root.path, command, root.path, command));
  }
  return root.path;
}

std::string marked(const Root& root) { return root.read_only() ? root.path + " (read-only)" : root.path; }

// The first word that is not an option (nor --dir's value): the subcommand
// CLI11 would otherwise report as an unexpected argument.
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--dir") {
      ++i;
    } else if (arg.empty() || arg[0] != '-') {
      return std::string(arg);
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cujit-cache: inspect and manage the cujit disk cache (cubins and tuning records)"};
  app.require_subcommand(1);
  std::string dir;
  app.add_option("--dir", dir, "cache directory (default: $CUJIT_CACHE_DIR, else $XDG_CACHE_HOME/cujit, else "
                               "~/.cache/cujit)");

  bool json = false;
  CLI::App* ls = app.add_subcommand("ls", "list cubin entries, least recently used first: variant, arch, size, last use");
  ls->add_flag("--json", json, "one JSON array");
  CLI::App* stats = app.add_subcommand("stats", "entries, bytes and tuning records, in total and by arch");
  stats->add_flag("--json", json, "one JSON object");
  CLI::App* tuning = app.add_subcommand("tuning", "each tuning record's timed candidates, fastest first, the tuner's "
                                                  "pick marked *");
  std::string family;
  tuning->add_option("--family", family, "only this kernel family's records (e.g. attn_decode, attn_sm90)");
  std::size_t top = 5;
  tuning->add_option("--top", top, "candidates shown per record besides the pick (0: all)")->capture_default_str();
  tuning->add_flag("--json", json, "one JSON array of every record, every candidate");
  CLI::App* verify = app.add_subcommand("verify", "check every entry's checksum; remove bad ones (exit 1 if any)");
  verify->add_flag("--json", json, "one JSON object");
  std::string max_bytes_text;
  CLI::App* prune = app.add_subcommand("prune", "remove least-recently-used cubins until under 90% of --max-bytes");
  prune->add_option("--max-bytes", max_bytes_text, "bound: bytes, or with K, M, G, T (e.g. 512M, 4G)")->required();
  CLI::App* clear = app.add_subcommand("clear", "remove every cubin entry and tuning record (asks nothing)");
  std::string file;
  CLI::App* exp = app.add_subcommand("export", "write every entry and tuning record to one archive FILE");
  exp->add_option("FILE", file, "archive to write (e.g. cache.cujit)")->required();
  std::string sign_key;
  exp->add_option("--sign", sign_key, "sign the archive with this Ed25519 private key (PEM)");
  CLI::App* imp = app.add_subcommand("import", "verify archive FILE, then add its entries to the cache");
  imp->add_option("FILE", file, "archive to read")->required();
  bool replace = false;
  imp->add_flag("--replace", replace, "replace existing valid entries that differ from the archive's (default: keep them)");
  std::vector<std::string> trusted_keys;
  imp->add_option("--trusted-key", trusted_keys,
                  "accept only archives signed by this Ed25519 public key (PEM); repeatable; adds to "
                  "CUJIT_CACHE_TRUSTED_KEYS");
  std::vector<std::string> names;
  for (const CLI::App* sub : std::as_const(app).get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  if (const std::string word = first_word(argc, argv);
      !word.empty() && std::find(names.begin(), names.end(), word) == names.end()) {
    fmt::print(stderr, "cujit-cache: unknown subcommand {}; the subcommands are {} (cujit-cache --help says more)\n",
               word, fmt::join(names, ", "));
    return 2;
  }
  CLI11_PARSE(app, argc, argv);

  try {
    int refused = 0;  // untrusted read-only roots: reported, and verify fails
    if (ls->parsed()) {
      jit::Json out = jit::Json::array();
      for (const Root& root : roots_to_show(dir, refused)) {
        print_untrusted(jit::cache::scan_cache(root.path, {}, root.access).untrusted);
        auto entries = jit::cache::list_cubins(root.path, root.access);
        // Least recently used first: the order eviction removes them in.
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& x, const auto& y) { return x.last_use_ns < y.last_use_ns; });
        if (json) {
          for (const auto& e : entries) {
            jit::Json j = jit::cache::to_json(e);
            j["root"] = root.path;
            j["read_only"] = root.read_only();
            out.push_back(std::move(j));
          }
          continue;
        }
        for (const auto& e : entries) {
          fmt::print("{:<60} {:<8} {:>10} {}  {}\n", e.valid ? e.variant : "(invalid entry)", e.arch,
                     human_bytes(e.bytes), local_time(e.last_use_ns), e.key.substr(0, 12));
        }
        fmt::print("{} entries in {}\n", entries.size(), marked(root));
      }
      if (json) std::cout << jit::cache::dump_for_output(out) << "\n";
      return 0;
    }

    if (stats->parsed()) {
      jit::Json out = jit::Json::object(), read_only_roots = jit::Json::array();
      for (const Root& root : roots_to_show(dir, refused)) {
        const jit::cache::CacheStats s = jit::cache::cache_stats(root.path, root.access);
        if (json) {
          jit::Json one = jit::cache::to_json(s);
          one["untrusted"] = jit::Json::array();
          for (const auto& u : s.untrusted) one["untrusted"].push_back({{"path", u.relative}, {"reason", u.reason}});
          one["dir"] = root.path;
          one["read_only"] = root.read_only();
          // The size bound applies to the writable root alone: read-only roots are never evicted.
          if (!root.read_only()) one["max_bytes"] = jit::detail::knobs().cache_max_bytes;
          if (root.read_only() && !out.empty()) {
            read_only_roots.push_back(std::move(one));
          } else {
            out = std::move(one);
          }
          continue;
        }
        print_untrusted(s.untrusted);
        fmt::print("{} {}\n", root.read_only() ? "read-only   " : "cache       ", root.path);
        fmt::print("cubins       {} ({}){}\n", s.cubins, human_bytes(s.cubin_bytes),
                   s.invalid_cubins ? fmt::format(", {} invalid", s.invalid_cubins) : "");
        fmt::print("tuning       {} records ({})\n", s.tuning_records, human_bytes(s.tuning_bytes));
        if (root.read_only()) {
          fmt::print("total        {} (never evicted: a read-only root)\n", human_bytes(s.total_bytes));
        } else {
          fmt::print("total        {} of {} (CUJIT_CACHE_MAX_BYTES){}\n", human_bytes(s.total_bytes),
                     human_bytes(jit::detail::knobs().cache_max_bytes),
                     s.temp_files ? fmt::format(", {} temp files", s.temp_files) : "");
        }
        for (const auto& [arch, a] : s.by_arch) {
          fmt::print("  {:<12} {} cubins ({}), {} tuning records\n", arch, a.cubins, human_bytes(a.cubin_bytes),
                     a.tuning_records);
        }
      }
      if (json) {
        out["read_only_roots"] = std::move(read_only_roots);
        std::cout << jit::cache::dump_for_output(out) << "\n";
      }
      return 0;
    }

    if (tuning->parsed()) {
      jit::Json out = jit::Json::array();
      for (const Root& root : roots_to_show(dir, refused)) {
        const tools::TuningListings listings = tools::list_tuning_records(root.path, root.access, family);
        for (const auto& u : listings.unreadable) fmt::print(stderr, "unreadable: {}: {}\n", u.relative, u.why);
        for (const tools::TuningListing& listing : listings.records) {
          if (json) {
            jit::Json one = tools::tuning_listing_json(listing);
            one["root"] = root.path;
            one["read_only"] = root.read_only();
            out.push_back(std::move(one));
          } else {
            fmt::print("{}", tools::format_tuning_listing(listing, top));
          }
        }
        if (!json) {
          fmt::print("{} tuning record{} in {}\n", listings.records.size(), listings.records.size() == 1 ? "" : "s",
                     marked(root));
        }
      }
      if (json) std::cout << jit::cache::dump_for_output(out) << "\n";
      return 0;
    }

    if (verify->parsed()) {
      std::size_t bad = 0;
      jit::Json out = jit::Json::object(), read_only_roots = jit::Json::array();
      for (const Root& root : roots_to_show(dir, refused)) {
        // A read-only root is only read: its bad entries are reported, never removed.
        const jit::cache::VerifyReport r = jit::cache::verify_cache(root.path, /*remove_bad=*/true, root.access);
        bad += r.bad.size();
        if (json) {
          jit::Json one = jit::cache::to_json(r);
          one["dir"] = root.path;
          one["read_only"] = root.read_only();
          if (root.read_only() && !out.empty()) {
            read_only_roots.push_back(std::move(one));
          } else {
            out = std::move(one);
          }
          continue;
        }
        for (const auto& b : r.bad) {
          fmt::print("bad: {}: {}{}\n", b.relative, b.reason,
                     root.read_only() ? " (read-only root: left as it is)"
                                      : (b.removed ? " (removed)" : " (could not remove)"));
        }
        fmt::print("verified {} cubins and {} tuning records in {}: {} bad\n", r.checked_cubins, r.checked_tuning,
                   marked(root), r.bad.size());
      }
      if (json) {
        out["read_only_roots"] = std::move(read_only_roots);
        out["refused_read_only_roots"] = refused;
        std::cout << jit::cache::dump_for_output(out) << "\n";
      }
      return bad == 0 && refused == 0 ? 0 : 1;
    }

    if (prune->parsed()) {
      const auto max_bytes = jit::cache::parse_byte_size(max_bytes_text);
      if (!max_bytes) {
        throw jit::Error(jit::ErrorCode::InvalidArgument,
                         jit::detail::byte_size_error(fmt::format("--max-bytes '{}'", max_bytes_text), max_bytes_text));
      }
      jit::cache::EvictionOptions options;
      const std::string root = writable_root(dir, "prune");
      const jit::cache::EvictionReport r = jit::cache::evict_lru(root, *max_bytes, options);
      if (r.lock_busy) {
        fmt::print("another process is evicting from {} right now; nothing done\n", root);
        return 0;
      }
      fmt::print("{}: {} -> {} (bound {}): removed {} cubins, {} tuning records, {} stale temp files\n", root,
                 human_bytes(r.bytes_before), human_bytes(r.bytes_after), human_bytes(*max_bytes), r.removed_cubins,
                 r.removed_tuning, r.removed_temps);
      return 0;
    }

    if (clear->parsed()) {
      const std::string root = writable_root(dir, "clear");
      const jit::cache::ClearReport r = jit::cache::clear_cache(root);
      fmt::print("cleared {}: removed {} files ({}){}\n", root, r.removed_files, human_bytes(r.removed_bytes),
                 r.kept_temp_files ? fmt::format("; kept {} temp files of running writers", r.kept_temp_files) : "");
      return 0;
    }

    if (exp->parsed()) {
      const std::string root = writable_root(dir, "export");
      const jit::cache::ExportReport r = jit::cache::export_archive(root, file, {sign_key});
      for (const auto& s : r.skipped) fmt::print(stderr, "skipped {}: {}\n", s.relative, s.reason);
      fmt::print("exported {} cubins and {} tuning records ({}) from {} to {} ({}{})\n", r.cubins, r.tuning_records,
                 human_bytes(r.bytes), root, file, human_bytes(r.archive_bytes), r.is_signed ? ", signed" : "");
      return 0;
    }

    if (imp->parsed()) {
      const std::string root = writable_root(dir, "import");
      jit::cache::ImportOptions options;
      options.replace = replace;
      options.trusted_keys = jit::detail::knobs().cache_trusted_keys;
      options.trusted_keys.insert(options.trusted_keys.end(), trusted_keys.begin(), trusted_keys.end());
      options.max_total_bytes = jit::detail::knobs().cache_max_bytes;
      const jit::cache::ImportReport r = jit::cache::import_archive(file, root, options);
      for (const auto& c : r.conflicts) {
        fmt::print(stderr, "kept {}: a valid entry that differs from the archive's is already there (--replace "
                           "replaces it)\n", c);
      }
      fmt::print("imported {} cubins and {} tuning records ({}) from {} into {}: {} written, {} already present, {} "
                 "conflicts kept{}\n",
                 r.cubins, r.tuning_records, human_bytes(r.bytes), file, root, r.written, r.unchanged,
                 r.conflicts.size(), r.signature_verified ? "; signature verified" : "");
      // The imported entries are the newest; keep the cache under its bound.
      const auto e = jit::cache::evict_lru(root, jit::detail::knobs().cache_max_bytes);
      if (e.evicted) {
        fmt::print("over CUJIT_CACHE_MAX_BYTES ({}): removed {} least-recently-used cubins, {} tuning records\n",
                   human_bytes(jit::detail::knobs().cache_max_bytes), e.removed_cubins, e.removed_tuning);
      }
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << tool_message("cujit-cache", e) << "\n";
    return 1;
  }
  return 0;
}
