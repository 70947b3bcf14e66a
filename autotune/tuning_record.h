// A tuning record: every timed candidate and the winner, as stored in the
// tuning DB (cache/tuning_db.h).
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/selection.h"

namespace jit::autotune {

nlohmann::json make_record(const std::vector<TimedCandidate>& candidates, const nlohmann::json& winner);
std::vector<TimedCandidate> record_candidates(const nlohmann::json& record);

}  // namespace jit::autotune
