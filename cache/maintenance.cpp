#include "cache/maintenance.h"

#include <cstring>

#include <fmt/format.h>

#include "cache/bounded_json.h"
#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/eviction.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"

namespace jit::cache {

namespace {

constexpr std::size_t kDigestLen = 32;
// Smallest entry CubinStore::encode can produce: magic, version, two lengths, checksum.
constexpr std::size_t kMinCubinEntry = 8 + 4 + 8 + 8 + kDigestLen;

}  // namespace

std::string cubin_entry_problem(const std::string& key, const std::string& bytes) {
  if (const auto entry = CubinStore::decode(key, bytes)) return CubinStore::payload_problem(*entry);
  if (bytes.size() < kMinCubinEntry) return fmt::format("truncated ({} bytes)", bytes.size());
  const std::size_t body = bytes.size() - kDigestLen;
  const Digest digest = sha256(std::string_view(bytes).substr(0, body));
  if (std::memcmp(digest.data(), bytes.data() + body, kDigestLen) != 0) return "checksum mismatch";
  return "bad format, metadata or key (checksum matches)";
}

std::string tuning_record_problem(const std::string& hex, const std::string& bytes) {
  std::string why;
  const std::optional<nlohmann::json> record = parse_bounded_json(bytes, kTuningRecordLimits, &why);
  if (!record) return fmt::format("not valid JSON ({})", why);
  if (!record->is_object()) return "not a JSON object";
  const auto it = record->find("key");
  if (it == record->end()) return "no \"key\"";
  try {
    if (sha256_hex(it->dump()) != hex) return "its \"key\" does not hash to the file name";
  } catch (const std::exception& e) {
    return fmt::format("its \"key\" cannot be serialized ({})", e.what());
  }
  return {};
}

std::vector<CubinInfo> list_cubins(const std::filesystem::path& root, RootAccess access) {
  std::vector<CubinInfo> out;
  for (const CacheFile& f : scan_cache(root, {}, access).files) {
    if (f.kind != CacheFileKind::cubin) continue;
    CubinInfo info;
    info.relative = f.relative;
    info.key = entry_hex_name(f.relative);
    info.bytes = f.id.size;
    info.last_use_ns = f.id.mtime_ns;
    std::string refused;
    if (auto contents = read_file_with_identity(f, kMaxCubinEntryBytes, &refused)) {
      info.bytes = contents->id.size;
      info.last_use_ns = contents->id.mtime_ns;
      // CubinStore::decode refuses the metadata fields when they are not strings.
      if (auto entry = CubinStore::decode(info.key, contents->bytes); entry && CubinStore::payload_problem(*entry).empty()) {
        info.valid = true;
        info.variant = string_field(entry->meta, "variant").value;
        info.arch = string_field(entry->meta, "arch").value;
        info.family = string_field(entry->meta, "family").value;
      }
    } else if (!f.regular || !refused.empty()) {
      // a symlink or other non-file, or another user's file, at an entry name: listed as invalid
    } else {
      continue;  // vanished since the scan
    }
    out.push_back(std::move(info));
  }
  return out;
}

CacheStats cache_stats(const std::filesystem::path& root, RootAccess access) {
  CacheStats stats;
  const CacheScan scan = scan_cache(root, {}, access);
  stats.total_bytes = scan.total_bytes;
  stats.untrusted = scan.untrusted;
  for (const CacheFile& f : scan.files) {
    if (f.kind == CacheFileKind::temp) ++stats.temp_files;
    if (f.kind != CacheFileKind::tuning || !f.regular) continue;
    auto contents = read_file_with_identity(f, kMaxTuningRecordBytes);
    if (!contents) continue;
    ++stats.tuning_records;
    stats.tuning_bytes += contents->id.size;
    const nlohmann::json record = parse_bounded_json(contents->bytes, kTuningRecordLimits).value_or(nullptr);
    std::string arch = "(unknown)";
    if (record.is_object()) {
      const auto key = record.find("key");
      if (key != record.end()) {
        if (const Field<std::string> a = string_field(*key, "arch"); a.state == FieldState::ok) arch = a.value;
      }
    }
    ++stats.by_arch[arch].tuning_records;
  }
  for (const CubinInfo& info : list_cubins(root, access)) {
    ++stats.cubins;
    stats.cubin_bytes += info.bytes;
    if (!info.valid) ++stats.invalid_cubins;
    ArchStats& a = stats.by_arch[info.valid ? (info.arch.empty() ? "(unknown)" : info.arch) : "(invalid)"];
    ++a.cubins;
    a.cubin_bytes += info.bytes;
  }
  return stats;
}

VerifyReport verify_cache(const std::filesystem::path& root, bool remove_bad, RootAccess access) {
  VerifyReport report;
  const CacheScan scan = scan_cache(root, {}, access);
  if (access == RootAccess::read_only) remove_bad = false;
  // Nothing below an untrusted directory is read or removed: it is reported
  // for its owner to fix.
  for (const UntrustedSubtree& u : scan.untrusted) report.bad.push_back({u.relative + "/", "untrusted: " + u.reason, false});
  for (const CacheFile& f : scan.files) {
    if (f.kind != CacheFileKind::cubin && f.kind != CacheFileKind::tuning) continue;
    const bool cubin = f.kind == CacheFileKind::cubin;
    std::string reason;
    FileIdentity id = f.id;
    const std::uint64_t limit = cubin ? kMaxCubinEntryBytes : kMaxTuningRecordBytes;
    std::string refused;
    std::optional<FileContents> contents;
    if (f.regular) contents = read_file_with_identity(f, limit, &refused);
    if (!f.regular) {
      reason = "not a regular file (a symlink or special file at an entry name)";
    } else if (!refused.empty()) {
      reason = "untrusted file: " + refused;  // another user's, or writable by others
    } else if (!contents && f.id.size > limit) {
      reason = fmt::format("larger than {} bytes", limit);
    } else if (!contents) {
      continue;  // vanished since the scan
    } else {
      id = contents->id;
      const std::string hex = entry_hex_name(f.relative);
      reason = cubin ? cubin_entry_problem(hex, contents->bytes) : tuning_record_problem(hex, contents->bytes);
    }
    if (cubin) ++report.checked_cubins;
    else ++report.checked_tuning;
    if (reason.empty()) continue;
    BadEntry bad{f.relative, reason, false};
    if (remove_bad) {
      const RemoveResult r = remove_if_unchanged(f, id);
      bad.removed = (r == RemoveResult::removed || r == RemoveResult::vanished);
    }
    report.bad.push_back(std::move(bad));
  }
  return report;
}

ClearReport clear_cache(const std::filesystem::path& root) {
  ClearReport report;
  const std::int64_t now = now_ns();
  const CacheScan scan = scan_cache(root);
  refuse_untrusted(scan);
  for (const CacheFile& f : scan.files) {
    if (f.kind == CacheFileKind::temp && now - f.id.mtime_ns < kStaleTempAgeNs) {
      ++report.kept_temp_files;
      continue;
    }
    if (remove_if_unchanged(f, f.id) == RemoveResult::removed) {
      ++report.removed_files;
      if (f.regular) report.removed_bytes += f.id.size;
    }
  }
  return report;
}

nlohmann::json to_json(const CubinInfo& info) {
  return {{"path", info.relative},     {"key", info.key},   {"bytes", info.bytes},
          {"last_use_ns", info.last_use_ns}, {"valid", info.valid}, {"variant", info.variant},
          {"arch", info.arch},         {"family", info.family}};
}

nlohmann::json to_json(const CacheStats& stats) {
  nlohmann::json by_arch = nlohmann::json::object();
  for (const auto& [arch, a] : stats.by_arch) {
    by_arch[arch] = {{"cubins", a.cubins}, {"cubin_bytes", a.cubin_bytes}, {"tuning_records", a.tuning_records}};
  }
  return {{"cubins", stats.cubins},
          {"cubin_bytes", stats.cubin_bytes},
          {"invalid_cubins", stats.invalid_cubins},
          {"tuning_records", stats.tuning_records},
          {"tuning_bytes", stats.tuning_bytes},
          {"temp_files", stats.temp_files},
          {"total_bytes", stats.total_bytes},
          {"by_arch", by_arch}};
}

nlohmann::json to_json(const VerifyReport& report) {
  nlohmann::json bad = nlohmann::json::array();
  for (const BadEntry& b : report.bad) bad.push_back({{"path", b.relative}, {"reason", b.reason}, {"removed", b.removed}});
  return {{"checked_cubins", report.checked_cubins}, {"checked_tuning", report.checked_tuning}, {"bad", bad}};
}

}  // namespace jit::cache
