// The kernel sources embedded at build time (kernel_src/), as the
// KernelSources of an entry file: what every built-in kernel family compiles.
#pragma once
#include <string>

#include "jit/kernel_family.h"

namespace jit::detail {

const KernelSources& embedded_sources(const std::string& entry);

}  // namespace jit::detail
