// A kernel family with one config and no tuning: the helper kernels of a
// plan (a combine pass, a check), compiled and cached like any variant.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "jit/kernel_family.h"
#include "jit/kernel_sources.h"

namespace jit::detail {

class FixedKernelFamily final : public KernelFamily {
 public:
  // `entry`: the source under kernel_src/; `variant` and `expression` give the
  // variant name and the instantiated C++ name for a spec; `index_params`:
  // KernelFamily::index_param_offsets of every spec; `index_only`:
  // KernelFamily::reads_only_index_data.
  FixedKernelFamily(std::string name, std::string entry, std::function<std::string(const Json&)> variant,
                    std::function<std::string(const Json&)> expression, std::vector<int> index_params = {},
                    bool index_only = false)
      : name_(std::move(name)), entry_(std::move(entry)), variant_(std::move(variant)),
        expression_(std::move(expression)), index_params_(std::move(index_params)), index_only_(index_only) {}

  std::string name() const override { return name_; }
  const KernelSources& sources() const override { return embedded_sources(entry_); }
  std::vector<Json> config_space(const Json&) const override { return {Json::object()}; }
  std::optional<std::string> why_pruned(const Json&, const Json&, const Target&) const override {
    return std::nullopt;
  }
  Json default_config(const Json&, const Target&) const override { return Json::object(); }
  std::string variant_name(const Json& spec, const Json&) const override { return variant_(spec); }
  std::string name_expression(const Json& spec, const Json&) const override { return expression_(spec); }
  std::vector<int> index_param_offsets(const Json&, const Json&) const override { return index_params_; }
  bool reads_only_index_data(const Json&, const Json&) const override { return index_only_; }

 private:
  std::string name_, entry_;
  std::function<std::string(const Json&)> variant_, expression_;
  std::vector<int> index_params_;
  bool index_only_;
};

}  // namespace jit::detail
