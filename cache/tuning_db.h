// Tuning records on disk: one JSON file per tune key, apart from binaries.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace jit::cache {

class TuningDb {
 public:
  explicit TuningDb(std::filesystem::path root);  // records live in root/"tuning"

  // `key` is the tune key as JSON; its SHA-256 names the file. A missing,
  // malformed or mismatching record (its "key" differs) is nullopt.
  std::optional<nlohmann::json> load(const nlohmann::json& key) const;
  // record["key"] is set to `key`; written atomically.
  void store(const nlohmann::json& key, nlohmann::json record) const;
  std::filesystem::path record_path(const nlohmann::json& key) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace jit::cache
