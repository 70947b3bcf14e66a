// Host-side access to the kernel sources embedded at build time.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace cujit::embedded {

// (include name relative to kernel_src/, text), sorted by name.
const std::vector<std::pair<std::string, std::string>>& kernel_files();

}  // namespace cujit::embedded
