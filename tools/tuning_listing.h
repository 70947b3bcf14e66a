// The tuning records of a cache root as cujit-cache tuning shows them: each
// record's key and its candidates, fastest first, the tuner's pick marked.
// What a kernel change is judged by before a benchmark runs: how far its
// configs finished from the pick, and which failed.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "autotune/selection.h"
#include "cache/trusted_dir.h"
#include "jit/cujit.h"

namespace tools {

struct TuningListing {
  std::string relative;  // tuning/<64 hex>.json
  jit::Json key;         // family, arch, device, spec, bucket and versions
  jit::Json winner;      // the config the tuner chose (null when the record has none)
  std::vector<jit::autotune::TimedCandidate> timed;   // fastest first
  std::vector<jit::autotune::TimedCandidate> failed;  // not timed, with why
};

// A record that could not be read or is malformed: listed apart, with why.
struct UnreadableRecord {
  std::string relative;
  std::string why;
};

struct TuningListings {
  std::vector<TuningListing> records;  // by family, arch, then key
  std::vector<UnreadableRecord> unreadable;
};

// Every record under root/tuning whose key's family is `family` (all when
// empty), through the cache's checked directories (cache/cache_scan.h).
TuningListings list_tuning_records(const std::filesystem::path& root, jit::cache::RootAccess access,
                                   const std::string& family);

// The text of one record: a line for its key, then its `top` fastest
// candidates (all when top is 0) and the pick wherever it finished, each with
// its time over the fastest's, then how many more were timed or failed.
std::string format_tuning_listing(const TuningListing& listing, std::size_t top);

// The same as JSON: key, winner, and the candidates (variant, config,
// median_us or error), fastest first, every one of them.
jit::Json tuning_listing_json(const TuningListing& listing);

}  // namespace tools
