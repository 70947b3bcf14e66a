#include "autotune/tuning_record.h"

#include <cmath>

#include <fmt/format.h>

#include "cache/bounded_json.h"

namespace jit::autotune {

namespace {

// Finite samples only: JSON has no infinity or NaN.
nlohmann::json sample_list(const std::vector<double>& samples) {
  nlohmann::json list = nlohmann::json::array();
  for (double us : samples) list.push_back(std::isfinite(us) ? nlohmann::json(us) : nlohmann::json(nullptr));
  return list;
}

}  // namespace

nlohmann::json make_record(const std::vector<TimedCandidate>& candidates, const nlohmann::json& winner,
                           const std::vector<Retimed>& retimed) {
  nlohmann::json list = nlohmann::json::array();
  for (const TimedCandidate& c : candidates) {
    nlohmann::json entry = {{"config", c.config}, {"variant", c.variant}};
    if (!c.error.empty()) {
      entry["error"] = c.error;
    } else if (!std::isfinite(c.median_us)) {
      entry["error"] = fmt::format("its time was not finite ({})", c.median_us);
    } else {
      entry["median_us"] = c.median_us;
    }
    list.push_back(std::move(entry));
  }
  nlohmann::json record = {{"winner", winner}, {"candidates", std::move(list)}};
  for (const Retimed& r : retimed) {
    record["retimed"].push_back({{"config", r.config},
                                 {"variant", r.variant},
                                 {"reason", r.reason},
                                 {"discarded_us", sample_list(r.discarded_us)},
                                 {"kept_us", sample_list(r.kept_us)}});
  }
  return record;
}

std::optional<std::vector<TimedCandidate>> record_candidates(const nlohmann::json& record, std::string* why) {
  using cache::FieldState;
  auto bad = [&](std::size_t i, const char* what) -> std::optional<std::vector<TimedCandidate>> {
    if (why != nullptr) *why = fmt::format("candidate {}: {}", i, what);
    return std::nullopt;
  };
  std::vector<TimedCandidate> out;
  if (!record.is_object()) return bad(0, "the record is not a JSON object");
  const auto it = record.find("candidates");
  if (it == record.end()) return out;
  if (!it->is_array()) return bad(0, "\"candidates\" is not an array");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& entry = (*it)[i];
    if (!entry.is_object()) return bad(i, "not a JSON object");
    const auto config = entry.find("config");
    if (config == entry.end() || !config->is_object()) return bad(i, "no \"config\" object");
    const cache::Field<std::string> variant = cache::string_field(entry, "variant");
    const cache::Field<double> median = cache::number_field(entry, "median_us");
    const cache::Field<std::string> error = cache::string_field(entry, "error");
    if (variant.bad()) return bad(i, "\"variant\" is not a string");
    if (median.bad()) return bad(i, "\"median_us\" is not a finite number");
    if (error.bad()) return bad(i, "\"error\" is not a string");
    TimedCandidate c;
    c.config = *config;
    c.variant = variant.value;
    c.median_us = median.value;
    if (error.state == FieldState::ok) c.error = error.value;
    else if (!(c.median_us > 0)) c.error = "no timing";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace jit::autotune
