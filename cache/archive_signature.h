// Ed25519 signatures over a cache archive's digest (OpenSSL EVP), so that a
// fleet can accept only archives its build machine made. Keys are PEM files
// as `openssl genpkey -algorithm ed25519` (private) and `openssl pkey -pubout`
// (public) write them.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cache/sha256.h"

namespace jit::cache {

inline constexpr std::size_t kArchiveSignatureBytes = 64;  // Ed25519

// The signature of `digest` (the archive's header and compressed stream)
// with the private key in `private_key_pem`. Throws CacheError when the file
// is not an Ed25519 private key in PEM or signing fails.
std::string sign_archive_digest(const Digest& digest, const std::filesystem::path& private_key_pem);

// True when `signature` is a signature of `digest` by any of the public keys.
// Throws CacheError when a key file cannot be read or is not an Ed25519
// public key in PEM (a misconfigured trust list is an error, never "no key").
bool archive_signature_verifies(const Digest& digest, std::string_view signature,
                                const std::vector<std::filesystem::path>& public_keys_pem);

// "a:b:c" -> {a, b, c} (empty parts dropped): CUJIT_CACHE_TRUSTED_KEYS.
std::vector<std::filesystem::path> split_key_list(std::string_view list);

}  // namespace jit::cache
