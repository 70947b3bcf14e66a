// A tuning record from disk into the tuner: TuningDb::load on a record file
// written from the input, then autotune::record_candidates, winner
// selection, and the record the tuner would write back.
//
// The whole input (after the mode byte, unused) is the record file for a
// fixed key. Nothing may throw: a malformed record is nullopt at load or at
// record_candidates (a miss). Candidates that come back have object configs,
// finite times where they have no error, and make_record -> load ->
// record_candidates gives the same count back.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "autotune/selection.h"
#include "autotune/tuning_record.h"
#include "cache/tuning_db.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path root = [] {
    std::filesystem::create_directories(fuzz::scratch_dir() / "tuning");
    return fuzz::scratch_dir();
  }();
  const fuzz::Input in = fuzz::split(data, size);
  const jit::cache::TuningDb db(root);
  const nlohmann::json& key = fuzz::tune_key();
  fuzz::write_file(db.record_path(key), in.rest);
  const std::optional<nlohmann::json> record = db.load(key);
  if (!record) return 0;
  const auto candidates = jit::autotune::record_candidates(*record);
  if (!candidates) return 0;
  for (const auto& c : *candidates) {
    if (!c.config.is_object()) fuzz::violated("record_candidates returned a config that is not an object");
    if (c.error.empty() && !(std::isfinite(c.median_us) && c.median_us > 0)) {
      fuzz::violated("record_candidates returned a timed candidate without a finite positive time");
    }
  }
  const std::optional<std::size_t> winner = jit::autotune::select_winner(*candidates);
  if (winner && *winner >= candidates->size()) fuzz::violated("select_winner returned an index out of range");
  // What the tuner writes back after a run reads back whole.
  const nlohmann::json winner_config = winner ? (*candidates)[*winner].config : nlohmann::json::object();
  db.store(key, jit::autotune::make_record(*candidates, winner_config));
  const std::optional<nlohmann::json> again = db.load(key);
  if (!again) fuzz::violated("a record the tuner wrote does not load");
  const auto back = jit::autotune::record_candidates(*again);
  if (!back || back->size() != candidates->size()) fuzz::violated("a record the tuner wrote reads back differently");
  return 0;
}
