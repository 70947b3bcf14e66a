// Fakes shared by the autotune tests: timed and failed candidates, config
// lists and tuning hooks with scripted timings. No GPU.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/selection.h"
#include "autotune/tuner.h"

namespace cujit_test {

using jit::autotune::TimedCandidate;
using nlohmann::json;

inline TimedCandidate timed(int id, double us) {
  return TimedCandidate{json{{"id", id}}, "v" + std::to_string(id), us, ""};
}
inline TimedCandidate failed(int id, std::string why) {
  return TimedCandidate{json{{"id", id}}, "v" + std::to_string(id), 0, std::move(why)};
}

inline std::vector<json> configs(int n) {
  std::vector<json> out;
  for (int i = 0; i < n; ++i) out.push_back(json{{"id", i}});
  return out;
}

// Fake timings by config id.
inline jit::autotune::TuneHooks fake_hooks(std::map<int, double> times) {
  jit::autotune::TuneHooks hooks;
  hooks.variant_name = [](const json& c) { return "v" + std::to_string(c.at("id").get<int>()); };
  hooks.compile = [](const json&) {};
  hooks.time_us = [times = std::move(times)](const json& c) { return times.at(c.at("id").get<int>()); };
  return hooks;
}

// Fake timings that depend on how often a config was timed before: time(id,
// n) for its n-th sample; `calls` counts the samples per id.
inline jit::autotune::TuneHooks counted_hooks(std::map<int, int>& calls, std::function<double(int id, int n)> time) {
  jit::autotune::TuneHooks hooks = fake_hooks({});
  hooks.time_us = [&calls, time = std::move(time)](const json& c) {
    const int id = c.at("id").get<int>();
    return time(id, calls[id]++);
  };
  return hooks;
}

}  // namespace cujit_test
