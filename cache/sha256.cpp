#include "cache/sha256.h"

#include <openssl/evp.h>

#include "cache/cache_error.h"

namespace jit::cache {

Digest sha256(std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size()) {
    throw CacheError(
        "SHA-256 failed in OpenSSL (EVP_Digest); check that the OpenSSL crypto library "
        "is installed correctly and that SHA-256 is not disabled by the OpenSSL configuration");
  }
  return out;
}

std::string to_hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(digest.size() * 2);
  for (unsigned char b : digest) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xF]);
  }
  return s;
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }

}  // namespace jit::cache
