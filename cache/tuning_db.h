// Tuning records on disk: one JSON file per tune key, apart from binaries.
// Every directory on the way is opened through TrustedDir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/trusted_dir.h"

namespace jit::cache {

// Larger records are refused unread (a record is a few KiB).
inline constexpr std::uint64_t kMaxTuningRecordBytes = std::uint64_t{16} << 20;

class TuningDb {
 public:
  explicit TuningDb(std::filesystem::path root);  // records live in root/"tuning"; root opened per call
  explicit TuningDb(TrustedDir root);             // the same under a root already opened and checked

  // `key` is the tune key as JSON; its SHA-256 names the file. A missing,
  // malformed or mismatching record (its "key" differs), or one in a
  // directory or file that is not trusted, is nullopt; `problem`, when given,
  // says why an existing record was refused. Under a read-only root a
  // directory that is not trusted throws UntrustedCacheDir instead (nothing
  // else would refuse it).
  std::optional<nlohmann::json> load(const nlohmann::json& key, std::string* problem = nullptr) const;
  // record["key"] is set to `key`; written atomically. Throws
  // UntrustedCacheDir when a directory on the way is not trusted.
  void store(const nlohmann::json& key, nlohmann::json record) const;
  std::filesystem::path record_path(const nlohmann::json& key) const;

 private:
  std::optional<TrustedDir> root_dir(bool create) const;
  std::filesystem::path root_;
  std::optional<TrustedDir> dir_;
};

// The record for `key` from the first of `roots` that has a servable one:
// the writable root, then the read-only ones (CUJIT_CACHE_READONLY_DIRS), in
// order. A record a read-only root holds but may not serve is skipped and the
// next root consulted; `skipped`, when given, gets a line naming it and why.
std::optional<nlohmann::json> load_tuning_record(const std::vector<TrustedDir>& roots, const nlohmann::json& key,
                                                 std::vector<std::string>* skipped = nullptr);

}  // namespace jit::cache
