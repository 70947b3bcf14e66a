#include "tools/tuning_listing.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "autotune/tuning_record.h"
#include "cache/bounded_json.h"
#include "cache/cache_scan.h"
#include "cache/tuning_db.h"

namespace tools {
namespace {

std::string key_field(const jit::Json& key, const char* name) {
  const jit::cache::Field<std::string> field = jit::cache::string_field(key, name);
  return field.state == jit::cache::FieldState::ok ? field.value : "?";
}

std::string compact(const jit::Json& key, const char* name) {
  const auto it = key.find(name);
  return it == key.end() ? "" : it->dump();
}

}  // namespace

TuningListings list_tuning_records(const std::filesystem::path& root, jit::cache::RootAccess access,
                                   const std::string& family) {
  TuningListings out;
  const jit::cache::CacheScan scan = jit::cache::scan_cache(root, {}, access);
  for (const jit::cache::CacheFile& f : scan.files) {
    if (f.kind != jit::cache::CacheFileKind::tuning || !f.regular) continue;
    std::string problem;
    const auto contents = jit::cache::read_file_with_identity(f, jit::cache::kMaxTuningRecordBytes, &problem);
    if (!contents) {
      if (!problem.empty()) out.unreadable.push_back({f.relative, problem});
      continue;  // else it vanished since the scan
    }
    std::string why;
    const auto record = jit::cache::parse_bounded_json(contents->bytes, jit::cache::kTuningRecordLimits, &why);
    if (!record || !record->is_object() || !record->contains("key") || !(*record)["key"].is_object()) {
      out.unreadable.push_back({f.relative, record ? "no \"key\" object" : why});
      continue;
    }
    const auto candidates = jit::autotune::record_candidates(*record, &why);
    if (!candidates) {
      out.unreadable.push_back({f.relative, why});
      continue;
    }
    TuningListing listing;
    listing.relative = f.relative;
    listing.key = (*record)["key"];
    if (!family.empty() && key_field(listing.key, "family") != family) continue;
    listing.winner = record->value("winner", jit::Json());
    for (const jit::autotune::TimedCandidate& c : *candidates) {
      (c.error.empty() ? listing.timed : listing.failed).push_back(c);
    }
    std::stable_sort(listing.timed.begin(), listing.timed.end(),
                     [](const auto& a, const auto& b) { return a.median_us < b.median_us; });
    out.records.push_back(std::move(listing));
  }
  auto order = [](const TuningListing& r) {
    return std::make_tuple(key_field(r.key, "family"), key_field(r.key, "arch"), r.key.dump());
  };
  std::stable_sort(out.records.begin(), out.records.end(),
                   [&](const TuningListing& a, const TuningListing& b) { return order(a) < order(b); });
  return out;
}

std::string format_tuning_listing(const TuningListing& listing, std::size_t top) {
  std::string text = fmt::format("{} {} {} spec {} bucket {}\n", key_field(listing.key, "family"),
                                 key_field(listing.key, "arch"), key_field(listing.key, "device"),
                                 compact(listing.key, "spec"), compact(listing.key, "bucket"));
  const std::size_t shown = top == 0 ? listing.timed.size() : std::min(top, listing.timed.size());
  const double fastest = listing.timed.empty() ? 0.0 : listing.timed.front().median_us;
  std::size_t listed = 0;
  for (std::size_t i = 0; i < listing.timed.size(); ++i) {
    const jit::autotune::TimedCandidate& c = listing.timed[i];
    const bool picked = c.config == listing.winner;
    if (i >= shown && !picked) continue;
    ++listed;
    text += fmt::format("  {} {:>10.2f} us {:>+7.1f}%  {}\n", picked ? '*' : ' ', c.median_us,
                        100.0 * (c.median_us / fastest - 1.0), c.variant);
  }
  if (listing.timed.size() > listed || !listing.failed.empty()) {
    text += fmt::format("    {} more timed, {} not timed{}\n", listing.timed.size() - listed, listing.failed.size(),
                        listing.failed.empty() ? "" : fmt::format(" (first: {}: {})", listing.failed.front().variant,
                                                                  listing.failed.front().error));
  }
  return text;
}

jit::Json tuning_listing_json(const TuningListing& listing) {
  jit::Json candidates = jit::Json::array();
  for (const auto* list : {&listing.timed, &listing.failed}) {
    for (const jit::autotune::TimedCandidate& c : *list) {
      jit::Json one = {{"variant", c.variant}, {"config", c.config}};
      if (c.error.empty()) {
        one["median_us"] = c.median_us;
      } else {
        one["error"] = c.error;
      }
      candidates.push_back(std::move(one));
    }
  }
  return {{"record", listing.relative},
          {"key", listing.key},
          {"winner", listing.winner},
          {"candidates", std::move(candidates)}};
}

}  // namespace tools
