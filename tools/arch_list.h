// "sm_90a,sm_89" -> {"sm_90a", "sm_89"}: the --arch lists of cujit-warmup and
// cujit-demo (empty names dropped, so "," is an empty list the tools refuse).
#pragma once
#include <sstream>
#include <string>
#include <vector>

inline std::vector<std::string> split_archs(const std::string& text) {
  std::vector<std::string> archs;
  std::stringstream stream(text);
  for (std::string arch; std::getline(stream, arch, ',');)
    if (!arch.empty()) archs.push_back(arch);
  return archs;
}
