#include "cache/cubin_store.h"

#include <cstdint>
#include <cstring>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "cache/atomic_file.h"
#include "cache/bounded_json.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/cubin_image.h"
#include "cache/sha256.h"

namespace jit::cache {

namespace {

constexpr char kMagic[8] = {'C', 'U', 'J', 'I', 'T', 'C', 'B', '\0'};
constexpr std::size_t kMagicLen = sizeof kMagic;
constexpr std::size_t kDigestLen = 32;
// magic + version + meta length + payload length + checksum
constexpr std::size_t kMinEntry = kMagicLen + 4 + 8 + 8 + kDigestLen;

bool valid_key(std::string_view key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The metadata fields read by listing, loading and cujit-sass, when present,
// are strings: an entry with `"variant": 5` is bad, not a type error later.
bool metadata_fields_are_strings(const nlohmann::json& meta) {
  for (const char* name : {"variant", "arch", "family", "lowered_name"}) {
    if (string_field(meta, name).bad()) return false;
  }
  return true;
}

void check_key(const std::string& key) {
  if (!valid_key(key)) {
    throw CacheError(fmt::format(
        "invalid cubin cache key '{}': a key must be 64 lowercase hex characters (a SHA-256 "
        "from sha256_hex); this is a bug in the caller",
        key.size() > 100 ? key.substr(0, 100) + "..." : key));
  }
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint64_t get_le(std::string_view bytes, std::size_t pos, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
  }
  return v;
}

}  // namespace

CubinStore::CubinStore(std::filesystem::path root) : root_(std::move(root)) {}

CubinStore::CubinStore(TrustedDir root) : root_(root.path()), dir_(std::move(root)) {}

std::optional<TrustedDir> CubinStore::root_dir(bool create) const {
  if (dir_) return dir_;
  return TrustedDir::open_root(root_, create);
}

std::string CubinStore::payload_problem(const CubinEntry& entry) {
  const auto arch = entry.meta.find("arch");
  if (arch == entry.meta.end() || !arch->is_string()) return "its metadata has no \"arch\" string";
  return cubin_image_problem(entry.payload, arch->get_ref<const std::string&>());
}

std::filesystem::path CubinStore::entry_path(const std::string& key) const {
  check_key(key);
  return root_ / "cubin" / key.substr(0, 2) / (key + ".cubin");
}

std::string CubinStore::encode(const std::string& key, std::string_view payload,
                               nlohmann::json meta) {
  check_key(key);
  if (meta.is_null()) meta = nlohmann::json::object();
  if (!meta.is_object()) {
    throw CacheError(fmt::format(
        "cubin cache metadata for key {} must be a JSON object, not {}; this is a bug in the "
        "caller",
        key, meta.type_name()));
  }
  meta["key"] = key;
  std::string meta_text;
  try {
    meta_text = meta.dump();
  } catch (const nlohmann::json::exception& e) {
    throw CacheError(fmt::format(
        "cubin cache metadata for key {} cannot be serialized ({}); make sure all strings in "
        "it are valid UTF-8",
        key, e.what()));
  }

  std::string out;
  out.reserve(kMinEntry + meta_text.size() + payload.size());
  out.append(kMagic, kMagicLen);
  put_u32(out, kCubinFormatVersion);
  put_u64(out, meta_text.size());
  out.append(meta_text);
  put_u64(out, payload.size());
  out.append(payload);
  const Digest digest = sha256(out);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

std::optional<CubinEntry> CubinStore::decode(const std::string& key, std::string_view bytes) {
  try {
    if (!valid_key(key)) return std::nullopt;
    if (bytes.size() < kMinEntry) return std::nullopt;

    // Checksum over everything before the trailing digest.
    const std::size_t body_len = bytes.size() - kDigestLen;
    const Digest digest = sha256(bytes.substr(0, body_len));
    if (std::memcmp(digest.data(), bytes.data() + body_len, kDigestLen) != 0) return std::nullopt;

    std::size_t pos = 0;
    if (std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) return std::nullopt;
    pos += kMagicLen;
    if (get_le(bytes, pos, 4) != kCubinFormatVersion) return std::nullopt;
    pos += 4;

    // Here body_len - pos >= 16 (both length fields) by the kMinEntry check.
    const std::uint64_t meta_len = get_le(bytes, pos, 8);
    pos += 8;
    if (meta_len > body_len - pos - 8) return std::nullopt;
    const std::string_view meta_text = bytes.substr(pos, static_cast<std::size_t>(meta_len));
    pos += static_cast<std::size_t>(meta_len);

    const std::uint64_t payload_len = get_le(bytes, pos, 8);
    pos += 8;
    if (payload_len != body_len - pos) return std::nullopt;
    const std::string_view payload = bytes.substr(pos, static_cast<std::size_t>(payload_len));

    std::optional<nlohmann::json> meta = parse_bounded_json(meta_text, kCubinMetadataLimits);
    if (!meta || !meta->is_object()) return std::nullopt;
    const Field<std::string> meta_key = string_field(*meta, "key");
    if (meta_key.state != FieldState::ok || meta_key.value != key) return std::nullopt;
    if (!metadata_fields_are_strings(*meta)) return std::nullopt;
    return CubinEntry{std::string(payload), std::move(*meta)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<CubinEntry> CubinStore::load(const std::string& key, std::string* problem) const {
  if (problem != nullptr) problem->clear();
  if (!valid_key(key)) return std::nullopt;
  std::optional<TrustedDir> shard;
  bool read_only = false;
  try {
    const std::optional<TrustedDir> root = root_dir(/*create=*/false);
    read_only = root && root->read_only();
    if (root) shard = root->open_subdir("cubin/" + key.substr(0, 2), /*create=*/false);
  } catch (const UntrustedCacheDir&) {
    if (read_only) throw;  // no store will ever refuse it: refused here
    return std::nullopt;   // a miss here, refused loudly by store
  } catch (const CacheError& e) {
    if (problem != nullptr) *problem = e.what();
    return std::nullopt;
  }
  if (!shard) return std::nullopt;
  const std::string name = key + ".cubin";
  std::string refused;
  std::optional<TrustedDir::File> file = shard->read_file(name, kMaxCubinEntryBytes, &refused);
  std::optional<CubinEntry> entry;
  std::string why = refused;
  if (file) {
    entry = decode(key, file->bytes);
    why = !entry ? "it does not decode (checksum, format or key)" : payload_problem(*entry);
    if (!why.empty()) entry.reset();
  }
  if (problem != nullptr && !entry) *problem = why;
  // A corrupt entry, or a file another user owns or can write: drop it (the
  // shard is ours, so we may). A symlink is left for the store's rename; a
  // read-only root is left as it is.
  if (!entry && !read_only && (file || (!refused.empty() && refused != "a symbolic link"))) shard->unlink(name);
  return entry;
}

void CubinStore::store(const std::string& key, std::string_view payload, nlohmann::json meta) const {
  check_key(key);
  const std::string bytes = encode(key, payload, std::move(meta));
  std::optional<CubinEntry> entry = decode(key, bytes);
  if (const std::string why = entry ? payload_problem(*entry) : "it does not encode"; !why.empty()) {
    throw CacheError(fmt::format("refusing to store cubin cache entry {}: {}", key, why));
  }
  root_dir(/*create=*/true)->open_subdir("cubin/" + key.substr(0, 2), /*create=*/true)->write_file(key + ".cubin", bytes);
}

}  // namespace jit::cache
