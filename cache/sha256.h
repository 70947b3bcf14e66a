// SHA-256 (OpenSSL) as lowercase hex: content keys and entry checksums.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace jit::cache {

using Digest = std::array<unsigned char, 32>;

Digest sha256(std::string_view data);
std::string sha256_hex(std::string_view data);
std::string to_hex(const Digest& digest);

// SHA-256 over data that arrives in pieces (an archive read or written as a
// stream). Throws CacheError when OpenSSL fails.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void update(const void* data, std::size_t n);
  void update(std::string_view data) { update(data.data(), data.size()); }
  Digest finish();  // once; the hasher is spent afterwards

 private:
  evp_md_ctx_st* ctx_;
};

}  // namespace jit::cache
