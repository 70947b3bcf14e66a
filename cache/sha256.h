// SHA-256 (OpenSSL) as lowercase hex: content keys and entry checksums.
#pragma once
#include <array>
#include <string>
#include <string_view>

namespace jit::cache {

using Digest = std::array<unsigned char, 32>;

Digest sha256(std::string_view data);
std::string sha256_hex(std::string_view data);
std::string to_hex(const Digest& digest);

}  // namespace jit::cache
