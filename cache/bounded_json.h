// JSON from bytes cujit did not write itself (tuning records, cubin metadata,
// archive manifests, warm-up manifests): a size cap and a nesting-depth cap
// checked before any value is built, so a hostile document can neither
// exhaust memory nor overflow the stack of the recursive dump(), operator==
// and destructor that would later walk it; and typed field accessors that
// say "bad entry" instead of throwing a JSON type error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace jit::cache {

// Deeper than any document cujit writes (records nest 4 levels) and far
// below what the recursive walkers can take.
inline constexpr std::size_t kJsonMaxDepth = 64;

struct JsonLimits {
  std::size_t max_bytes;
  std::size_t max_depth = kJsonMaxDepth;
};

// Limits of each kind of document (cujit writes at most a few tens of KiB).
inline constexpr JsonLimits kTuningRecordLimits{16u << 20};
inline constexpr JsonLimits kCubinMetadataLimits{1u << 20};
inline constexpr JsonLimits kWarmupManifestLimits{16u << 20};

// The value `text` holds, or nullopt with `error` (when given) saying why:
// too large, too deep (and at which byte), or the parser's message with its
// position. Never throws a JSON exception.
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, const JsonLimits& limits,
                                                 std::string* error = nullptr);

// Where `text` first nests deeper than `max_depth` arrays and objects
// (brackets inside strings do not count), or nullopt when it never does.
std::optional<std::size_t> first_byte_deeper_than(std::string_view text, std::size_t max_depth);

// Typed fields of an untrusted object. A field that is absent is `absent`;
// one of another type is `wrong_type`, which callers treat as a bad entry.
enum class FieldState { absent, ok, wrong_type };

template <class T>
struct Field {
  FieldState state = FieldState::absent;
  T value{};
  bool bad() const { return state == FieldState::wrong_type; }
};

Field<std::string> string_field(const nlohmann::json& object, std::string_view name);
// A JSON number that is finite (integers included).
Field<double> number_field(const nlohmann::json& object, std::string_view name);
Field<std::int64_t> integer_field(const nlohmann::json& object, std::string_view name);

// For output: invalid UTF-8 in strings (a path from a directory name) is
// replaced by U+FFFD instead of making dump() throw.
std::string dump_for_output(const nlohmann::json& value, int indent = -1);

}  // namespace jit::cache
