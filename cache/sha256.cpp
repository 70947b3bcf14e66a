#include "cache/sha256.h"

#include <openssl/evp.h>

#include "cache/cache_error.h"

namespace jit::cache {

namespace {

[[noreturn]] void openssl_failed() {
  throw CacheError(
      "SHA-256 failed in OpenSSL (EVP_Digest*); check that the OpenSSL crypto library is installed correctly and "
      "that SHA-256 is not disabled by the OpenSSL configuration");
}

}  // namespace

Digest sha256(std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size()) {
    openssl_failed();
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

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    openssl_failed();
  }
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(ctx_); }

void Sha256Hasher::update(const void* data, std::size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx_, data, n) != 1) openssl_failed();
}

Digest Sha256Hasher::finish() {
  Digest d{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, d.data(), &len) != 1 || len != d.size()) openssl_failed();
  return d;
}

}  // namespace jit::cache
