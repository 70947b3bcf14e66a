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

std::string record_name(const nlohmann::json& key) { return sha256_hex(dump_key(key)) + ".json"; }

}  // namespace

TuningDb::TuningDb(std::filesystem::path root) : root_(std::move(root)) {}

TuningDb::TuningDb(TrustedDir root) : root_(root.path()), dir_(std::move(root)) {}

std::optional<TrustedDir> TuningDb::root_dir(bool create) const {
  if (dir_) return dir_;
  return TrustedDir::open_root(root_, create);
}

std::filesystem::path TuningDb::record_path(const nlohmann::json& key) const {
  return root_ / "tuning" / record_name(key);
}

std::optional<nlohmann::json> TuningDb::load(const nlohmann::json& key, std::string* problem) const {
  if (problem != nullptr) problem->clear();
  bool read_only = false;
  try {
    const std::optional<TrustedDir> root = root_dir(/*create=*/false);
    read_only = root->read_only();
    const std::optional<TrustedDir> dir = root->open_subdir("tuning", /*create=*/false);
    if (!dir) return std::nullopt;
    std::string refused;
    const std::optional<TrustedDir::File> file = dir->read_file(record_name(key), kMaxTuningRecordBytes, &refused);
    if (!file) {
      if (problem != nullptr) *problem = refused;
      return std::nullopt;
    }
    std::string why;
    std::optional<nlohmann::json> record = parse_bounded_json(file->bytes, kTuningRecordLimits, &why);
    if (!record || !record->is_object()) {
      if (problem != nullptr) *problem = record ? "not a JSON object" : "not valid JSON (" + why + ")";
      return std::nullopt;
    }
    auto it = record->find("key");
    if (it == record->end() || *it != key) {
      if (problem != nullptr) *problem = "its \"key\" is not the key asked for";
      return std::nullopt;
    }
    return record;
  } catch (const UntrustedCacheDir&) {
    if (read_only) throw;  // no store will ever refuse it: refused here
    return std::nullopt;   // a miss here; store refuses it loudly
  } catch (const std::exception& e) {
    if (problem != nullptr) *problem = e.what();
    return std::nullopt;  // an unusable directory is a miss
  }
}

std::optional<nlohmann::json> load_tuning_record(const std::vector<TrustedDir>& roots, const nlohmann::json& key,
                                                 std::vector<std::string>* skipped) {
  for (const TrustedDir& root : roots) {
    const TuningDb db(root);
    std::string problem;
    if (std::optional<nlohmann::json> record = db.load(key, &problem)) return record;
    if (root.read_only() && !problem.empty() && skipped != nullptr) {
      skipped->push_back(fmt::format("skipped tuning record {} of a read-only cache root: {}",
                                     db.record_path(key).string(), problem));
    }
  }
  return std::nullopt;
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
  root_dir(/*create=*/true)->open_subdir("tuning", /*create=*/true)->write_file(record_name(key), text);
}

}  // namespace jit::cache
