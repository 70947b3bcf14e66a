// A minimal CUDA ELF image for tests that store cubin entries without
// compiling: the 64-byte ELF64 header NVRTC 13 writes (EM_CUDA, ABI version
// 8, the SM in e_flags bits 8-15; cache/cubin_image.cpp), then `body`.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/cubin_image.h"

namespace jit::test {

inline std::string fake_cubin(std::string_view arch, std::string_view body = "") {
  std::string h(64, '\0');
  auto put = [&](std::size_t pos, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) h[pos + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  h.replace(0, 4, "\x7f" "ELF");
  h[4] = 2;     // ELFCLASS64
  h[5] = 1;     // little endian
  h[6] = 1;     // EV_CURRENT
  h[7] = 0x41;  // the CUDA OS ABI NVRTC writes
  h[8] = 8;     // CUDA ELF ABI version 2
  put(16, 2, 2);    // ET_EXEC
  put(18, 190, 2);  // EM_CUDA
  put(20, 1, 4);    // e_version
  put(48, 0x06000004u | (jit::cache::sm_number(arch).value_or(0) << 8), 4);  // e_flags
  put(52, 64, 2);   // e_ehsize
  return h + std::string(body);
}

}  // namespace jit::test
