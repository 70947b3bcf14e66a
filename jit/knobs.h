// Every CUJIT_* environment knob, read in one place.
//   CUJIT_CACHE_DIR   cache root (else $XDG_CACHE_HOME/cujit, else ~/.cache/cujit)
//   CUJIT_CACHE_READONLY_DIRS  pre-warmed cache roots served beneath the writable one, never written:
//                     absolute paths, ':'-separated, consulted in order (empty entries are ignored)
//   CUJIT_LOG         off (default) | info | debug: log lines on stderr
//   CUJIT_AUTOTUNE    full (default): tune every unpruned config on the first call per key
//                     fast: time only a shortlist (the default config and the next ones in space order)
//                     off: use the heuristic default config, compiling it if needed
//                     frozen: never benchmark, never compile: the tuning DB's winner or the default,
//                             from the disk cache only (a missing binary is an error naming cujit-warmup)
//                     background: a new shape class runs at once on the default config while `full`
//                             tuning runs on a worker thread; later calls take the winner when ready
//   CUJIT_DISK_CACHE  1 (default) | 0: keep compiled binaries and tuning records on disk
//   CUJIT_CACHE_MAX_BYTES  size bound of the disk cache (cubin/ + tuning/): bytes, or with a
//                     K/M/G/T suffix (binary: "512M", "4G"); default 4G. After each store over the
//                     bound, least-recently-used cubins are removed until it is under 90% of it
//   CUJIT_CACHE_TRUSTED_KEYS  Ed25519 public keys (PEM files, ':'-separated): when set,
//                     `cujit-cache import` accepts only archives signed by one of them
//   CUJIT_FAMILY      auto (default): the fastest attention family the GPU and problem allow
//                     (decode for few query rows and KV caches, else sm90 on sm_90a, else portable) | a registered family's name (portable,
//                     sm90, ...): only that family. The names are the attention layer's
//                     (jit/attention/family_registry.cpp), so a new family adds none here
//   CUJIT_COMPILE_THREADS  how many NVRTC compiles a tuning run does at once: a positive integer;
//                     default the CPUs this process may run on (its affinity mask, so taskset and
//                     cpusets are honoured). Lower it when several processes tune at the same time
//   CUJIT_PDL         1 (default) | 0: launch the decode and ragged-batch kernels with programmatic dependent
//                     launch on sm_90+, so a step's kernel starts while the previous one in the stream ends
//   CUJIT_CHECK       0 (default) | 1: before each KV-cache run or ragged batch, check the lengths, page ids
//                     and cu_seqlens on the device and report the first bad one (waits for the stream: for debugging)
//   CUJIT_SM90_TILE_ORDER  auto (default): the host's choice per shape (jit/attention/sm90/tile_order.h)
//                     | heads | rows | a positive integer N: always that order of the sm90 kernel's tiles, N
//                     (batch, head) pairs per group, rows first within it (for measuring and testing)
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace jit::detail {

enum class LogLevel { off = 0, info = 1, debug = 2 };
enum class AutotuneMode { full, fast, off, frozen, background };

struct Knobs {
  LogLevel log_level = LogLevel::off;
  AutotuneMode autotune = AutotuneMode::full;
  bool disk_cache = true;
  std::uint64_t cache_max_bytes = std::uint64_t{4} << 30;
  std::vector<std::filesystem::path> cache_trusted_keys;
  std::vector<std::filesystem::path> cache_read_only_dirs;
  std::string family;  // CUJIT_FAMILY: "" for auto, else the family's name
  // CUJIT_SM90_TILE_ORDER as (batch, head) pairs per tile group: 0 for the
  // host's choice, 1 for heads first, kRowsFirst for one group of all pairs.
  std::int64_t tile_group_heads = 0;
  unsigned compile_threads = 1;
  bool pdl = true;
  // CUJIT_FP8_STAGE_V: dense FP8 plans may stage V transposed in a workspace
  // of V's size (the sm90 family's vt_staged configs) where that times faster.
  bool fp8_stage_v = true;
  bool check = false;
};

// Read once, on first use. Throws Error(InvalidArgument) naming the knob for
// a value it does not understand.
const Knobs& knobs();

// Parsing, separate for tests.
LogLevel parse_log_level(const char* value);
AutotuneMode parse_autotune_mode(const char* value);
// CUJIT_FAMILY: "" for auto (unset, empty or "auto"), else a name of lower-case
// letters, digits and '_' (whether a family has it is the registry's check).
std::string parse_family_name(const char* value);
inline constexpr std::int64_t kRowsFirst = INT64_MAX;
std::int64_t parse_tile_group_heads(const char* value);
// CUJIT_COMPILE_THREADS: unset or empty gives `usable_cpus`.
unsigned parse_compile_threads(const char* value, unsigned usable_cpus);
// The CPUs this process may run on (sched_getaffinity), at least 1.
unsigned usable_cpus();
bool parse_bool_knob(const char* name, const char* value, bool fallback);
// CUJIT_CACHE_MAX_BYTES: unset or empty is the 4 GiB default; 0 is refused.
std::uint64_t parse_cache_max_bytes(const char* value);
// CUJIT_CACHE_READONLY_DIRS: ':'-separated absolute paths, in order; empty
// entries are ignored (unset or empty is none). A relative path is refused: it
// would depend on the working directory, unlike what an image or mount names.
std::vector<std::filesystem::path> parse_cache_read_only_dirs(const char* value);
// Why `text`, which cache::parse_byte_size refused, is not a size, after
// `what` (e.g. "--max-bytes '99999999999999999999'"): out of range, or not a size.
std::string byte_size_error(std::string_view what, std::string_view text);

}  // namespace jit::detail
