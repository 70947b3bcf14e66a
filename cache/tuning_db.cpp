#include "cache/tuning_db.h"

#include <utility>

#include <fmt/format.h>

#include "cache/atomic_file.h"
#include "cache/bounded_json.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/sha256.h"

namespace jit::cache {

namespace {

std::string dump_key(const nlohmann::json& key) {
  try {
    return key.dump();
  } catch (const nlohmann::json::exception& e) {
    throw CacheError(fmt::format(
        "tuning key cannot be serialized ({}); make sure all strings in it are valid UTF-8",
        e.what()));
  }
}

}  // namespace

TuningDb::TuningDb(std::filesystem::path root) : dir_(std::move(root) / "tuning") {}

std::filesystem::path TuningDb::record_path(const nlohmann::json& key) const {
  return dir_ / (sha256_hex(dump_key(key)) + ".json");
}

std::optional<nlohmann::json> TuningDb::load(const nlohmann::json& key) const {
  std::optional<std::string> text = read_regular_file(record_path(key));
  if (!text) return std::nullopt;
  try {
    std::optional<nlohmann::json> record = parse_bounded_json(*text, kTuningRecordLimits);
    if (!record || !record->is_object()) return std::nullopt;
    auto it = record->find("key");
    if (it == record->end() || *it != key) return std::nullopt;
    return record;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void TuningDb::store(const nlohmann::json& key, nlohmann::json record) const {
  if (record.is_null()) record = nlohmann::json::object();
  if (!record.is_object()) {
    throw CacheError(fmt::format(
        "tuning record must be a JSON object, not {}; this is a bug in the caller",
        record.type_name()));
  }
  const std::filesystem::path path = record_path(key);
  record["key"] = key;
  std::string text;
  try {
    text = record.dump(1);
  } catch (const nlohmann::json::exception& e) {
    throw CacheError(fmt::format(
        "tuning record for {} cannot be serialized ({}); make sure all strings in it are "
        "valid UTF-8",
        path.string(), e.what()));
  }
  text.push_back('\n');
  ensure_private_dir(dir_);
  write_file_atomic(path, text);
}

}  // namespace jit::cache
