/// @file typed_kernel_family.h
/// A KernelFamily written on typed data: the family works on its own Spec and
/// Config structs, and this adapter implements the JSON-facing KernelFamily
/// methods once, converting at the edge (nlohmann's to_json / from_json for
/// Spec and Config, found by argument-dependent lookup). JSON then appears
/// only where it is stored or logged: tuning records, cache metadata, logs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_family.h"

namespace jit {

/// `Base` is KernelFamily or an interface derived from it (a family kind
/// with methods of its own, such as the attention families').
template <class Spec, class Config, class Base = KernelFamily>
class TypedKernelFamily : public Base {
 public:
  /// Every config worth considering for this spec (before pruning).
  virtual std::vector<Config> typed_config_space(const Spec& spec) const = 0;
  /// nullopt keeps the config; otherwise why it cannot run on target.
  virtual std::optional<std::string> typed_why_pruned(const Spec& spec, const Config& config,
                                                      const Target& target) const = 0;
  virtual Config typed_default_config(const Spec& spec, const Target& target) const = 0;
  virtual std::string typed_variant_name(const Spec& spec, const Config& config) const = 0;
  virtual std::string typed_name_expression(const Spec& spec, const Config& config) const = 0;
  virtual std::vector<std::string> typed_compile_options(const Spec&, const Config&) const { return {}; }

  std::vector<Json> config_space(const Json& spec) const final {
    std::vector<Json> space;
    for (const Config& config : typed_config_space(spec.get<Spec>())) space.push_back(config);
    return space;
  }
  std::optional<std::string> why_pruned(const Json& spec, const Json& config, const Target& target) const final {
    return typed_why_pruned(spec.get<Spec>(), config.get<Config>(), target);
  }
  Json default_config(const Json& spec, const Target& target) const final {
    return typed_default_config(spec.get<Spec>(), target);
  }
  std::string variant_name(const Json& spec, const Json& config) const final {
    return typed_variant_name(spec.get<Spec>(), config.get<Config>());
  }
  std::string name_expression(const Json& spec, const Json& config) const final {
    return typed_name_expression(spec.get<Spec>(), config.get<Config>());
  }
  std::vector<std::string> compile_options(const Json& spec, const Json& config) const final {
    return typed_compile_options(spec.get<Spec>(), config.get<Config>());
  }
};

}  // namespace jit
