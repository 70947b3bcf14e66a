#include "cache/archive_signature.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>

#include <fmt/format.h>

#include "cache/atomic_file.h"
#include "cache/cache_error.h"

namespace jit::cache {

namespace {

// What is signed: a fixed domain string, then the digest, so that a signature
// made for anything else with the same key never verifies as an archive's.
constexpr std::string_view kDomain = "cujit-cache-archive v2 ed25519";

std::string signed_message(const Digest& digest) {
  std::string m(kDomain);
  m.push_back('\0');
  m.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return m;
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no detail from OpenSSL";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

Key read_key(const std::filesystem::path& path, bool private_key) {
  const char* kind = private_key ? "private" : "public";
  const std::optional<std::string> pem = read_regular_file(path);
  if (!pem) {
    throw CacheError(fmt::format("cannot read the Ed25519 {} key {} (missing, not a regular file, or unreadable)",
                                 kind, path.string()));
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())),
                                                &BIO_free);
  Key key(bio ? (private_key ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                             : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr))
              : nullptr,
          &EVP_PKEY_free);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    const std::string detail = key ? "another kind of key" : openssl_error();
    throw CacheError(fmt::format(
        "{} is not an Ed25519 {} key in PEM ({}); make one with `openssl genpkey -algorithm ed25519 -out KEY.pem` "
        "and its public half with `openssl pkey -in KEY.pem -pubout -out PUB.pem`",
        path.string(), kind, detail));
  }
  return key;
}

}  // namespace

std::string sign_archive_digest(const Digest& digest, const std::filesystem::path& private_key_pem) {
  const Key key = read_key(private_key_pem, /*private_key=*/true);
  const std::string message = signed_message(digest);
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::string sig(kArchiveSignatureBytes, '\0');
  std::size_t len = sig.size();
  // Ed25519 hashes internally: no digest is named (NULL), and it signs in one shot.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != kArchiveSignatureBytes) {
    throw CacheError(fmt::format("signing the cache archive with {} failed: {}", private_key_pem.string(),
                                 openssl_error()));
  }
  return sig;
}

bool archive_signature_verifies(const Digest& digest, std::string_view signature,
                                const std::vector<std::filesystem::path>& public_keys_pem) {
  const std::string message = signed_message(digest);
  for (const std::filesystem::path& path : public_keys_pem) {
    const Key key = read_key(path, /*private_key=*/false);
    MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
      throw CacheError(fmt::format("cannot verify with {}: {}", path.string(), openssl_error()));
    }
    const int ok = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                                    signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                                    message.size());
    ERR_clear_error();
    if (ok == 1) return true;
  }
  return false;
}

std::vector<std::filesystem::path> split_key_list(std::string_view list) {
  std::vector<std::filesystem::path> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t colon = std::min(list.find(':', pos), list.size());
    if (colon > pos) out.emplace_back(std::string(list.substr(pos, colon - pos)));
    pos = colon + 1;
  }
  return out;
}

}  // namespace jit::cache
