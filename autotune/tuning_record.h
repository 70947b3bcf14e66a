// A tuning record: every timed candidate and the winner, as stored in the
// tuning DB (cache/tuning_db.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/outliers.h"
#include "autotune/selection.h"

namespace jit::autotune {

// A candidate whose time is not finite is stored with an error instead (JSON
// has no infinity: it would be written as null and the record then refused).
// `retimed`, when not empty, is kept as "retimed": one entry per re-timed
// candidate (config, variant, reason, discarded_us, kept_us) of the run that
// wrote the record; readers of the candidates ignore it.
nlohmann::json make_record(const std::vector<TimedCandidate>& candidates, const nlohmann::json& winner,
                           const std::vector<Retimed>& retimed = {});

// The candidates of a record read back from disk, or nullopt (and `why`,
// when given) when the record is malformed: "candidates" not an array, an
// entry that is not an object with an object "config", a "variant" or
// "error" that is not a string, a "median_us" that is not a finite number.
// A malformed record is a miss for the tuner, never an exception.
std::optional<std::vector<TimedCandidate>> record_candidates(const nlohmann::json& record, std::string* why = nullptr);

}  // namespace jit::autotune
