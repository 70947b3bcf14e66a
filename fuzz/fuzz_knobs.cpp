// The environment knob parsers (jit/knobs.cpp) on any text.
//
// Mode byte % 8 picks the parser: CUJIT_LOG, CUJIT_AUTOTUNE, CUJIT_FAMILY,
// CUJIT_SM90_TILE_ORDER, CUJIT_COMPILE_THREADS, CUJIT_DISK_CACHE,
// CUJIT_CACHE_MAX_BYTES, CUJIT_CACHE_READONLY_DIRS; the rest, up to its first
// NUL, is the value. Only jit::Error(InvalidArgument) may escape, naming the
// knob; accepted thread counts and cache bounds are positive, accepted
// read-only roots absolute and non-empty.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "jit/error.h"
#include "jit/knobs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace jit::detail;
  const fuzz::Input in = fuzz::split(data, size);
  const std::string value = in.rest.c_str();  // an environment value ends at its first NUL
  static const char* const kKnobs[] = {"CUJIT_LOG",           "CUJIT_AUTOTUNE",        "CUJIT_FAMILY",
                                       "CUJIT_SM90_TILE_ORDER", "CUJIT_COMPILE_THREADS", "CUJIT_DISK_CACHE",
                                       "CUJIT_CACHE_MAX_BYTES", "CUJIT_CACHE_READONLY_DIRS"};
  const int which = in.mode % 8;
  try {
    switch (which) {
      case 0: (void)parse_log_level(value.c_str()); break;
      case 1: (void)parse_autotune_mode(value.c_str()); break;
      case 2: (void)parse_family_name(value.c_str()); break;
      case 3:
        if (parse_tile_group_heads(value.c_str()) < 0) fuzz::violated("CUJIT_SM90_TILE_ORDER gave a negative group");
        break;
      case 4:
        if (parse_compile_threads(value.c_str(), 16) == 0) fuzz::violated("CUJIT_COMPILE_THREADS gave 0 threads");
        break;
      case 5: (void)parse_bool_knob(kKnobs[5], value.c_str(), true); break;
      case 7:
        for (const auto& dir : parse_cache_read_only_dirs(value.c_str())) {
          if (dir.empty() || !dir.is_absolute()) fuzz::violated("CUJIT_CACHE_READONLY_DIRS gave a relative path");
        }
        break;
      default:
        if (parse_cache_max_bytes(value.c_str()) == 0) fuzz::violated("CUJIT_CACHE_MAX_BYTES gave a bound of 0");
    }
  } catch (const jit::Error& e) {
    if (e.code() != jit::ErrorCode::InvalidArgument) fuzz::violated("a knob parser threw another error code");
    if (std::string(e.what()).find(kKnobs[which]) == std::string::npos) fuzz::violated("a knob error does not name it");
  }
  return 0;
}
