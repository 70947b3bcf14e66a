// What a cubin payload must be before the cache stores, serves, verifies or
// imports it: an ELF image for CUDA built for the arch its entry claims.
// The entry checksum only says the bytes are the ones written; this says they
// are a GPU binary for the right target (an archive could otherwise carry any
// bytes under a valid key to cuModuleLoadData).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace jit::cache {

// 90 for "sm_90" and "sm_90a", 100 for "sm_100f"; nullopt for anything that
// is not "sm_<digits>" with an optional "a" or "f".
std::optional<unsigned> sm_number(std::string_view arch);

// The SM number in a CUDA ELF header; nullopt when `image` is not one.
std::optional<unsigned> cubin_sm(std::string_view image);

// Why `image` may not be served as a cubin for `arch` ("" when it may): not a
// 64-bit little-endian ELF, not EM_CUDA, headers outside the file, an unknown
// CUDA ELF ABI, or built for another SM.
std::string cubin_image_problem(std::string_view image, std::string_view arch);

}  // namespace jit::cache
