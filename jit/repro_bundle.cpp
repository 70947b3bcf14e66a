#include "jit/repro_bundle.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "cache/safe_path.h"

namespace jit::detail {

namespace {

// `name` (an include name from the sources) below `dir`, directories created as needed.
void write_below(const cache::DirFd& dir, const std::string& name, const std::string& text) {
  const std::vector<std::string> parts = cache::safe_relative_path(name);
  std::vector<cache::DirFd> opened;  // each subdirectory stays open while its child is made
  const cache::DirFd* at = &dir;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    opened.push_back(cache::open_private_subdir(*at, parts[i]));
    at = &opened.back();
  }
  cache::write_new_file(*at, parts.back(), text);
}

}  // namespace

std::filesystem::path write_repro_bundle(const std::filesystem::path& cache_root, const CompileRequest& request,
                                         const std::string& variant, const std::string& log) {
  const cache::DirFd root = cache::open_directory(cache_root.string());
  const cache::DirFd repro = cache::open_private_subdir(root, "repro");
  std::string name;
  const cache::DirFd bundle = cache::make_unique_subdir(repro, fmt::format("{}-{}-", variant, request.arch), name);
  const cache::DirFd src = cache::open_private_subdir(bundle, "src");
  for (const auto& [file, text] : request.sources->files) write_below(src, file, text);
  cache::write_new_file(bundle, "options.txt", fmt::format("{}\n", fmt::join(nvrtc_options(request), "\n")));
  cache::write_new_file(bundle, "name_expression.txt", request.name_expression + "\n");
  cache::write_new_file(bundle, "log.txt", log + "\n");
  return cache_root / "repro" / name;
}

}  // namespace jit::detail
