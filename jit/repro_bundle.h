// What an NVRTC failure leaves behind for replaying it outside the process:
// <cache>/repro/<variant>-<arch>-<random>/ with src/ (the entry source and
// every header under its include name), options.txt, name_expression.txt and
// log.txt.
#pragma once
#include <filesystem>
#include <string>

#include "jit/nvrtc_compiler.h"

namespace jit::detail {

// Writes the bundle under `cache_root` and returns its directory. Names from
// the sources are kept inside the bundle (an absolute or `..` include name
// is written below src/, under a safe spelling), the bundle's name cannot be
// guessed, and nothing is written through a link. Throws CacheError.
std::filesystem::path write_repro_bundle(const std::filesystem::path& cache_root, const CompileRequest& request,
                                         const std::string& variant, const std::string& log);

}  // namespace jit::detail
