// Comma-separated fields, empty ones kept ("a,,b," is four): the serving
// bench's CSV lines and its --shape text.
#pragma once
#include <sstream>
#include <string>
#include <vector>

namespace serving_bench {

inline std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  for (std::string field; std::getline(stream, field, ',');) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

}  // namespace serving_bench
