#include "autotune/tuning_record.h"

namespace jit::autotune {

nlohmann::json make_record(const std::vector<TimedCandidate>& candidates, const nlohmann::json& winner) {
  nlohmann::json list = nlohmann::json::array();
  for (const TimedCandidate& c : candidates) {
    nlohmann::json entry = {{"config", c.config}, {"variant", c.variant}};
    if (c.error.empty()) {
      entry["median_us"] = c.median_us;
    } else {
      entry["error"] = c.error;
    }
    list.push_back(std::move(entry));
  }
  return {{"winner", winner}, {"candidates", std::move(list)}};
}

std::vector<TimedCandidate> record_candidates(const nlohmann::json& record) {
  std::vector<TimedCandidate> out;
  const auto it = record.find("candidates");
  if (it == record.end() || !it->is_array()) return out;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("config")) continue;
    TimedCandidate c;
    c.config = entry["config"];
    c.variant = entry.value("variant", "");
    c.median_us = entry.value("median_us", 0.0);
    c.error = entry.value("error", c.median_us > 0 ? "" : "no timing");
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace jit::autotune
