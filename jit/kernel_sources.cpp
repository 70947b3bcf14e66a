#include "jit/kernel_sources.h"

#include <map>
#include <mutex>

#include "jit/embedded_kernel_sources.h"

namespace jit::detail {

const KernelSources& embedded_sources(const std::string& entry) {
  static std::mutex mutex;
  static std::map<std::string, KernelSources> by_entry;
  std::lock_guard lock(mutex);
  auto [it, inserted] = by_entry.try_emplace(entry);
  if (inserted) {
    it->second.entry = entry;
    it->second.files = cujit::embedded::kernel_files();
  }
  return it->second;
}

}  // namespace jit::detail
