#include "cache/bounded_json.h"

#include <cmath>

#include <fmt/format.h>

namespace jit::cache {

std::optional<std::size_t> first_byte_deeper_than(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::optional<nlohmann::json> parse_bounded_json(std::string_view text, const JsonLimits& limits,
                                                 std::string* error) {
  auto refuse = [&](std::string why) -> std::optional<nlohmann::json> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  if (text.size() > limits.max_bytes) {
    return refuse(fmt::format("{} bytes, more than the {} accepted", text.size(), limits.max_bytes));
  }
  if (const auto at = first_byte_deeper_than(text, limits.max_depth)) {
    return refuse(fmt::format("nested deeper than {} levels at byte {}", limits.max_depth, *at + 1));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return refuse(e.what());  // "[json.exception.parse_error.101] parse error at line 1, column 7: ..."
  }
}

namespace {

const nlohmann::json* find_field(const nlohmann::json& object, std::string_view name) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

Field<std::string> string_field(const nlohmann::json& object, std::string_view name) {
  const nlohmann::json* v = find_field(object, name);
  if (v == nullptr) return {};
  if (!v->is_string()) return {FieldState::wrong_type, {}};
  return {FieldState::ok, v->get<std::string>()};
}

Field<double> number_field(const nlohmann::json& object, std::string_view name) {
  const nlohmann::json* v = find_field(object, name);
  if (v == nullptr) return {};
  if (!v->is_number() || !std::isfinite(v->get<double>())) return {FieldState::wrong_type, {}};
  return {FieldState::ok, v->get<double>()};
}

Field<std::int64_t> integer_field(const nlohmann::json& object, std::string_view name) {
  const nlohmann::json* v = find_field(object, name);
  if (v == nullptr) return {};
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(INT64_MAX)) return {FieldState::wrong_type, {}};
  if (!v->is_number_integer()) return {FieldState::wrong_type, {}};
  return {FieldState::ok, v->get<std::int64_t>()};
}

std::string dump_for_output(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace jit::cache
