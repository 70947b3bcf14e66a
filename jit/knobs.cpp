#include "jit/knobs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <limits>
#include <string>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cache/archive_signature.h"
#include "cache/eviction.h"
#include "jit/error.h"

namespace jit::detail {

LogLevel parse_log_level(const char* value) {
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "off" || v == "0") return LogLevel::off;
  if (v == "info" || v == "1") return LogLevel::info;
  if (v == "debug" || v == "2") return LogLevel::debug;
  throw Error(ErrorCode::InvalidArgument, fmt::format("CUJIT_LOG='{}' is not one of off, info, debug", v));
}

namespace {

// A knob that names one of a few choices: unset or empty gives the first.
template <class T>
T parse_choice(std::string_view knob, const char* value,
               std::initializer_list<std::pair<std::string_view, T>> choices) {
  const std::string_view v = value ? value : "";
  if (v.empty()) return choices.begin()->second;
  std::vector<std::string_view> names;
  for (const auto& [name, choice] : choices) {
    if (v == name) return choice;
    names.push_back(name);
  }
  throw Error(ErrorCode::InvalidArgument, fmt::format("{}='{}' is not one of {}", knob, v, fmt::join(names, ", ")));
}

}  // namespace

AutotuneMode parse_autotune_mode(const char* value) {
  return parse_choice<AutotuneMode>("CUJIT_AUTOTUNE", value,
                                    {{"full", AutotuneMode::full},
                                     {"fast", AutotuneMode::fast},
                                     {"off", AutotuneMode::off},
                                     {"frozen", AutotuneMode::frozen},
                                     {"background", AutotuneMode::background}});
}

std::string parse_family_name(const char* value) {
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "auto") return "";
  const bool name = std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!name) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("CUJIT_FAMILY='{}' is not auto or a family name (lower-case letters, digits, '_'), e.g. "
                            "sm90 or portable",
                            v));
  }
  return std::string(v);
}

std::int64_t parse_tile_group_heads(const char* value) {
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "auto") return 0;
  if (v == "heads") return 1;
  if (v == "rows") return kRowsFirst;
  std::int64_t heads = 0;
  const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), heads);
  if (error != std::errc() || end != v.data() + v.size() || heads <= 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("CUJIT_SM90_TILE_ORDER='{}' is not auto, heads, rows or a positive number of heads per "
                            "tile group",
                            v));
  }
  return heads;
}

unsigned parse_compile_threads(const char* value, unsigned usable) {
  const std::string_view v = value ? value : "";
  if (v.empty()) return usable;
  unsigned threads = 0;
  const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), threads);
  if (error != std::errc() || end != v.data() + v.size() || threads == 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("CUJIT_COMPILE_THREADS='{}' is not a positive integer (this process may use {} CPUs)", v,
                            usable));
  }
  return threads;
}

unsigned usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool parse_bool_knob(const char* name, const char* value, bool fallback) {
  const std::string_view v = value ? value : "";
  if (v.empty()) return fallback;
  if (v == "1" || v == "on" || v == "true") return true;
  if (v == "0" || v == "off" || v == "false") return false;
  throw Error(ErrorCode::InvalidArgument, fmt::format("{}='{}' is not one of 0, 1", name, v));
}

std::string byte_size_error(std::string_view what, std::string_view text) {
  // Digits and a unit that parse with a small number: the number is too large.
  const std::size_t digits = text.find_first_not_of("0123456789");
  if (digits != 0 && cache::parse_byte_size("1" + std::string(text.substr(std::min(digits, text.size()))))) {
    return fmt::format("{} is out of range: the largest size is {} bytes (just under 16E)", what,
                       std::numeric_limits<std::uint64_t>::max());
  }
  return fmt::format("{} is not a size: give bytes, or a number with K, M, G or T (binary multiples), e.g. 512M or 4G",
                     what);
}

std::uint64_t parse_cache_max_bytes(const char* value) {
  const std::string_view v = value ? value : "";
  if (v.empty()) return cache::kDefaultCacheMaxBytes;
  const std::optional<std::uint64_t> bytes = cache::parse_byte_size(v);
  if (!bytes) throw Error(ErrorCode::InvalidArgument, byte_size_error(fmt::format("CUJIT_CACHE_MAX_BYTES='{}'", v), v));
  if (*bytes == 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("CUJIT_CACHE_MAX_BYTES='{}' leaves no room for the cache; to keep nothing on disk set "
                            "CUJIT_DISK_CACHE=0",
                            v));
  }
  return *bytes;
}

std::vector<std::filesystem::path> parse_cache_read_only_dirs(const char* value) {
  std::vector<std::filesystem::path> dirs;
  std::string_view rest = value ? value : "";
  while (!rest.empty()) {
    const std::size_t colon = std::min(rest.find(':'), rest.size());
    const std::string_view entry = rest.substr(0, colon);
    rest.remove_prefix(std::min(colon + 1, rest.size()));
    if (entry.empty()) continue;
    if (entry.front() != '/') {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("CUJIT_CACHE_READONLY_DIRS names '{}', a relative path; give absolute paths, "
                              "':'-separated (a relative one would depend on the working directory)",
                              entry));
    }
    dirs.emplace_back(entry);
  }
  return dirs;
}

const Knobs& knobs() {
  static const Knobs knobs = [] {
    Knobs k;
    k.log_level = parse_log_level(std::getenv("CUJIT_LOG"));
    k.autotune = parse_autotune_mode(std::getenv("CUJIT_AUTOTUNE"));
    k.disk_cache = parse_bool_knob("CUJIT_DISK_CACHE", std::getenv("CUJIT_DISK_CACHE"), true);
    k.pdl = parse_bool_knob("CUJIT_PDL", std::getenv("CUJIT_PDL"), true);
    k.fp8_stage_v = parse_bool_knob("CUJIT_FP8_STAGE_V", std::getenv("CUJIT_FP8_STAGE_V"), true);
    k.check = parse_bool_knob("CUJIT_CHECK", std::getenv("CUJIT_CHECK"), false);
    k.cache_max_bytes = parse_cache_max_bytes(std::getenv("CUJIT_CACHE_MAX_BYTES"));
    if (const char* keys = std::getenv("CUJIT_CACHE_TRUSTED_KEYS")) k.cache_trusted_keys = cache::split_key_list(keys);
    k.cache_read_only_dirs = parse_cache_read_only_dirs(std::getenv("CUJIT_CACHE_READONLY_DIRS"));
    k.family = parse_family_name(std::getenv("CUJIT_FAMILY"));
    k.tile_group_heads = parse_tile_group_heads(std::getenv("CUJIT_SM90_TILE_ORDER"));
    k.compile_threads = parse_compile_threads(std::getenv("CUJIT_COMPILE_THREADS"), usable_cpus());
    return k;
  }();
  return knobs;
}

}  // namespace jit::detail
