// Every attention family and config this GPU runs, for the suites that
// check each config rather than the default one (determinism, in one process
// and across processes).
#pragma once
#include <vector>

#include "jit/attention_family.h"
#include "jit/kernel_family.h"

namespace cujit_test {

/// The portable family, and the sm90 family on sm_90a.
std::vector<const jit::detail::AttentionFamily*> families_here();

/// The configs of `family` the tuner would time for `spec` on this GPU.
std::vector<jit::Json> kept_configs(const jit::detail::AttentionFamily& family, const jit::Json& spec);

/// Compiles (or loads) every config on all cores at once, so later launches
/// only look them up; a config that fails is reported through gtest.
void load_all(const jit::detail::AttentionFamily& family, const jit::Json& spec, const std::vector<jit::Json>& configs);

}  // namespace cujit_test
