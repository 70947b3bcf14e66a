#include "cache/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/archive_signature.h"
#include "cache/atomic_file.h"
#include "cache/bounded_json.h"
#include "cache/cache_error.h"
#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/fs_detail.h"
#include "cache/sha256.h"
#include "cache/trusted_dir.h"
#include "cache/tuning_db.h"
#include "cache/zstd_stream.h"

namespace jit::cache {

namespace {

using detail::Fd;

constexpr char kMagic[8] = {'C', 'U', 'J', 'I', 'T', 'A', 'R', '\0'};
constexpr std::size_t kHeaderLen = sizeof kMagic + 4;
constexpr std::size_t kSignatureBlockLen = 1 + kArchiveSignatureBytes;
constexpr std::size_t kDigestLen = 32;
constexpr std::size_t kTrailerLen = kSignatureBlockLen + kDigestLen;
constexpr unsigned char kUnsigned = 0, kEd25519 = 1;
constexpr const char* kFormatName = "cujit-cache-archive";

// ---------------------------------------------------------------- helpers

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint64_t get_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

struct ManifestEntry {
  std::string relative;
  std::uint64_t size = 0;
  std::string sha256;
  bool cubin() const { return classify_relative_path(relative) == CacheFileKind::cubin; }
};

std::string header_bytes() {
  std::string h(kMagic, sizeof kMagic);
  put_u32(h, kArchiveFormatVersion);
  return h;
}

// u64 length + manifest, as the first bytes of the decompressed stream.
std::string manifest_prefix(const std::vector<ManifestEntry>& entries) {
  nlohmann::json files = nlohmann::json::array();
  for (const ManifestEntry& e : entries) files.push_back({{"path", e.relative}, {"size", e.size}, {"sha256", e.sha256}});
  const std::string text =
      nlohmann::json{{"format", kFormatName}, {"version", kArchiveFormatVersion}, {"files", files}}.dump();
  std::string out;
  put_u64(out, text.size());
  out += text;
  return out;
}

// The signature kind and signature for a stream digest.
std::string signature_block(const Digest& stream_digest, const std::filesystem::path& sign_key) {
  if (sign_key.empty()) return std::string(kSignatureBlockLen, '\0');
  return static_cast<char>(kEd25519) + sign_archive_digest(stream_digest, sign_key);
}

// ---------------------------------------------------------------- reading

// The archive opened for import: header, whole-file checksum and signature.
class ArchiveFileIn {
 public:
  explicit ArchiveFileIn(const std::filesystem::path& path) : name_(path.string()) {
    fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd_.get() < 0) {
      throw CacheError(fmt::format("cannot open cache archive {}: {}", name_, detail::errno_text(errno)));
    }
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      throw CacheError(fmt::format("cache archive {} is not a regular file", name_));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    char header[kHeaderLen] = {};
    if (size_ >= kHeaderLen) pread_all(fd_.get(), header, kHeaderLen, 0, name_);
    if (size_ < kHeaderLen || std::memcmp(header, kMagic, sizeof kMagic) != 0) {
      throw CacheError(fmt::format(
          "{} is not a cujit cache archive (it does not start with the archive magic); make one with "
          "`cujit-cache export FILE`",
          name_));
    }
    const std::uint64_t version = get_le(header + sizeof kMagic, 4);
    if (version != kArchiveFormatVersion) {
      throw CacheError(fmt::format(
          "cache archive {} has format version {}, but this cujit reads version {}; export it again with this "
          "version of cujit-cache; nothing was imported",
          name_, version, kArchiveFormatVersion));
    }
    if (size_ < kHeaderLen + kTrailerLen) throw corrupt("it is truncated (shorter than its header and trailer)");
  }

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t stream_begin() const { return kHeaderLen; }
  std::uint64_t stream_end() const { return size_ - kTrailerLen; }

  // Every byte before the trailing checksum against it (catches any flipped,
  // missing or extra byte before anything is decompressed), then the
  // signature: required, and by a trusted key, when trusted keys are given.
  void verify(const std::vector<std::filesystem::path>& trusted_keys) {
    Sha256Hasher whole, stream;
    std::string buf(1 << 16, '\0');
    for (std::uint64_t pos = 0; pos < stream_end();) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), stream_end() - pos));
      pread_all(fd_.get(), buf.data(), n, pos, name_);
      whole.update(buf.data(), n);
      stream.update(buf.data(), n);
      pos += n;
    }
    char trailer[kTrailerLen];
    pread_all(fd_.get(), trailer, kTrailerLen, stream_end(), name_);
    whole.update(trailer, kSignatureBlockLen);
    const Digest d = whole.finish();
    if (std::memcmp(d.data(), trailer + kSignatureBlockLen, kDigestLen) != 0) {
      throw corrupt("its SHA-256 checksum does not match (the file is truncated or has changed bytes)");
    }
    const auto kind = static_cast<unsigned char>(trailer[0]);
    const std::string_view signature(trailer + 1, kArchiveSignatureBytes);
    if (kind == kUnsigned) {
      if (signature.find_first_not_of('\0') != std::string_view::npos) throw corrupt("its unsigned trailer is not blank");
    } else if (kind != kEd25519) {
      throw corrupt(fmt::format("its signature kind {} is unknown", kind));
    }
    is_signed_ = kind == kEd25519;
    if (trusted_keys.empty()) return;
    if (!is_signed_) {
      throw CacheError(fmt::format(
          "cache archive {} is not signed, and trusted keys are configured (--trusted-key or "
          "CUJIT_CACHE_TRUSTED_KEYS), so only archives signed by one of them are imported; export it with "
          "`cujit-cache export --sign KEY.pem`; nothing was imported",
          name_));
    }
    if (!archive_signature_verifies(stream.finish(), signature, trusted_keys)) {
      throw CacheError(fmt::format(
          "cache archive {} is signed, but not by any trusted key ({}); it was made elsewhere or has been "
          "altered; nothing was imported",
          name_, trusted_keys.size() == 1 ? trusted_keys.front().string() : fmt::format("{} keys", trusted_keys.size())));
    }
    signature_verified_ = true;
  }
  bool is_signed() const { return is_signed_; }
  bool signature_verified() const { return signature_verified_; }

  // The compressed stream, decompressed in order; its errors name this archive.
  ZstdReader stream() const {
    return ZstdReader(fd_.get(), stream_begin(), stream_end(), name_,
                      [this](const std::string& what) { return corrupt(what); });
  }

  CacheError corrupt(const std::string& what) const {
    return CacheError(fmt::format("cache archive {} is corrupt: {}{}", name_, what, outcome()));
  }
  CacheError rejected(const std::string& what) const {
    return CacheError(fmt::format("cache archive {} is rejected: {}{}", name_, what, outcome()));
  }
  // How a rejection ends: before publishing starts, nothing was written.
  std::string outcome() const { return publishing_ ? "" : "; nothing was imported"; }
  void start_publishing() { publishing_ = true; }

 private:
  std::string name_;
  Fd fd_;
  std::uint64_t size_ = 0;
  bool publishing_ = false;
  bool is_signed_ = false;
  bool signature_verified_ = false;
};

bool is_lower_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The most the files of an archive of this size may expand to.
std::uint64_t expansion_limit(const ArchiveFileIn& file) {
  return file.size() > kArchiveExpansionFloorBytes / kArchiveMaxExpansion ? file.size() * kArchiveMaxExpansion
                                                                           : kArchiveExpansionFloorBytes;
}

// Reads and validates the manifest (paths, sizes, hashes, duplicates, the
// total) before any file's bytes are read.
std::vector<ManifestEntry> read_manifest(ZstdReader& in, const ArchiveFileIn& file, const ImportOptions& options) {
  char len_bytes[8];
  in.read(len_bytes, 8, "the manifest length");
  const std::uint64_t len = get_le(len_bytes, 8);
  if (len > kArchiveMaxManifestBytes) {
    throw file.corrupt(fmt::format("its manifest claims {} bytes (at most {} are accepted)", len, kArchiveMaxManifestBytes));
  }
  std::string text(static_cast<std::size_t>(len), '\0');
  in.read(text.data(), text.size(), "the manifest");
  const nlohmann::json manifest = parse_bounded_json(text, JsonLimits{kArchiveMaxManifestBytes}).value_or(nullptr);
  if (!manifest.is_object()) throw file.corrupt("its manifest is not a JSON object");
  const auto format = manifest.find("format");
  if (format == manifest.end() || *format != kFormatName) {
    throw file.corrupt(fmt::format("its manifest's \"format\" is not \"{}\"", kFormatName));
  }
  const auto version = manifest.find("version");
  if (version == manifest.end() || !version->is_number_unsigned() || *version != kArchiveFormatVersion) {
    throw file.corrupt(fmt::format("its manifest's \"version\" is not {}", kArchiveFormatVersion));
  }
  const auto files = manifest.find("files");
  if (files == manifest.end() || !files->is_array()) throw file.corrupt("its manifest has no \"files\" array");

  std::vector<ManifestEntry> entries;
  std::set<std::string> seen;
  std::uint64_t total = 0;
  const std::uint64_t expansion = expansion_limit(file);
  const std::uint64_t limit = std::min(expansion, options.max_total_bytes);
  for (const nlohmann::json& f : *files) {
    if (!f.is_object()) throw file.corrupt("a manifest entry is not a JSON object");
    const auto path = f.find("path");
    const auto size = f.find("size");
    const auto sha = f.find("sha256");
    if (path == f.end() || !path->is_string()) throw file.corrupt("a manifest entry has no \"path\" string");
    ManifestEntry e;
    e.relative = path->get<std::string>();
    if (!is_entry_relative_path(e.relative)) {
      std::string shown = e.relative.size() > 200 ? e.relative.substr(0, 200) + "..." : e.relative;
      throw file.rejected(fmt::format(
          "its manifest names the path {}, and only cubin/xx/<64 hex>.cubin and tuning/<64 hex>.json are accepted "
          "(no '..', no absolute paths, nothing else)",
          nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    if (!seen.insert(e.relative).second) throw file.corrupt(fmt::format("its manifest lists {} twice", e.relative));
    if (size == f.end() || !size->is_number_unsigned()) {
      throw file.corrupt(fmt::format("the manifest entry {} has no unsigned \"size\"", e.relative));
    }
    e.size = size->get<std::uint64_t>();
    const std::uint64_t max = e.cubin() ? kMaxCubinEntryBytes : kMaxTuningRecordBytes;
    if (e.size > max) {
      throw file.corrupt(fmt::format("the manifest entry {} claims {} bytes (at most {} are accepted)", e.relative,
                                     e.size, max));
    }
    total += e.size;  // at most ~28,000 entries of at most 64 MiB: no overflow
    if (total > limit) {
      throw file.rejected(
          options.max_total_bytes <= expansion
              ? fmt::format("its files add up to more than {} bytes, the cache's bound (CUJIT_CACHE_MAX_BYTES); raise "
                            "the bound or import a smaller archive",
                            limit)
              : fmt::format("its files add up to more than {} bytes, over {} times the archive's {} bytes (a "
                            "decompression bomb)",
                            limit, kArchiveMaxExpansion, file.size()));
    }
    if (sha == f.end() || !sha->is_string() || !is_lower_hex64(sha->get<std::string>())) {
      throw file.corrupt(fmt::format("the manifest entry {} has no \"sha256\" of 64 lowercase hex digits", e.relative));
    }
    e.sha256 = sha->get<std::string>();
    entries.push_back(std::move(e));
  }
  return entries;
}

// One file's bytes, checked against its manifest entry and its own format.
std::string read_checked_file(ZstdReader& in, const ArchiveFileIn& file, const ManifestEntry& e) {
  std::string bytes(static_cast<std::size_t>(e.size), '\0');
  in.read(bytes.data(), bytes.size(), e.relative.c_str());
  if (sha256_hex(bytes) != e.sha256) {
    throw file.corrupt(fmt::format("{} does not match its SHA-256 in the manifest", e.relative));
  }
  const std::string hex = entry_hex_name(e.relative);
  const std::string problem = e.cubin() ? cubin_entry_problem(hex, bytes) : tuning_record_problem(hex, bytes);
  if (!problem.empty()) {
    throw file.corrupt(fmt::format("{} is not a valid {}: {}", e.relative, e.cubin() ? "cubin entry" : "tuning record",
                                   problem));
  }
  return bytes;
}

// "cubin/ab/<key>.cubin" -> {"cubin/ab", "<key>.cubin"}.
std::pair<std::string, std::string> split_relative(const std::string& relative) {
  const auto slash = relative.rfind('/');
  return {relative.substr(0, slash), relative.substr(slash + 1)};
}

// ---------------------------------------------------------------- writing

// The directory an archive is written to, opened as the caller names it.
Fd open_parent(const std::filesystem::path& archive) {
  std::filesystem::path dir = archive.parent_path();
  if (dir.empty()) dir = ".";
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw CacheError(fmt::format("cannot write cache archive {}: cannot open {}: {}", archive.string(), dir.string(),
                                 detail::errno_text(errno)));
  }
  return fd;
}

// An anonymous scratch file beside the archive (created O_EXCL, unlinked at
// once) that holds the compressed file bytes until the manifest is known.
class ScratchFile {
 public:
  ScratchFile(int dir_fd, const std::filesystem::path& archive)
      : what_(fmt::format("cannot write cache archive {} (scratch file)", archive.string())) {
    const std::string name = temp_file_name(archive.filename().string() + ".body");
    fd_.reset(::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd_.get() < 0) throw CacheError(fmt::format("{}: {}", what_, detail::errno_text(errno)));
    ::unlinkat(dir_fd, name.c_str(), 0);
  }
  void write(std::string_view bytes) {
    write_all(fd_.get(), bytes.data(), bytes.size(), what_);
    size_ += bytes.size();
  }
  void copy_to(const std::function<void(std::string_view)>& out) const {
    std::string buf(1 << 16, '\0');
    for (std::uint64_t pos = 0; pos < size_;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size_ - pos));
      pread_all(fd_.get(), buf.data(), n, pos, what_);
      out(std::string_view(buf.data(), n));
      pos += n;
    }
  }

 private:
  Fd fd_;
  std::string what_;
  std::uint64_t size_ = 0;
};

// Header, stream and trailer, given the stream as a producer: the stream
// digest is signed, everything is checksummed.
void write_container(const std::function<void(const Sink&)>& stream, const std::filesystem::path& sign_key,
                     const Sink& out) {
  Sha256Hasher whole, streamed;
  const Sink both = [&](std::string_view bytes) {
    whole.update(bytes);
    streamed.update(bytes);
    out(bytes);
  };
  both(header_bytes());
  stream(both);
  const std::string signature = signature_block(streamed.finish(), sign_key);
  whole.update(signature);
  out(signature);
  const Digest d = whole.finish();
  out(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

}  // namespace

std::string encode_archive(const std::vector<ArchiveFile>& files, const std::filesystem::path& sign_key) {
  std::vector<ManifestEntry> entries;
  for (const ArchiveFile& f : files) entries.push_back({f.relative, f.bytes.size(), sha256_hex(f.bytes)});
  std::string out;
  write_container(
      [&](const Sink& sink) {
        ZstdCompressor manifest(sink);
        manifest.write(manifest_prefix(entries));
        manifest.end();
        ZstdCompressor body(sink);
        for (const ArchiveFile& f : files) body.write(f.bytes);
        body.end();
      },
      sign_key, [&](std::string_view bytes) { out.append(bytes); });
  return out;
}

ExportReport export_archive(const std::filesystem::path& root, const std::filesystem::path& archive,
                            const ExportOptions& options) {
  ExportReport report;
  const CacheScan scan = scan_cache(root);
  for (const UntrustedSubtree& u : scan.untrusted) report.skipped.push_back({u.relative + "/", "untrusted: " + u.reason, false});
  const Fd dir = open_parent(archive);
  ScratchFile body(dir.get(), archive);
  std::vector<ManifestEntry> entries;
  {
    ZstdCompressor c([&](std::string_view bytes) { body.write(bytes); });
    for (const CacheFile& f : scan.files) {
      if (f.kind != CacheFileKind::cubin && f.kind != CacheFileKind::tuning) continue;
      const bool cubin = f.kind == CacheFileKind::cubin;
      const std::uint64_t limit = cubin ? kMaxCubinEntryBytes : kMaxTuningRecordBytes;
      std::string refused;
      std::optional<FileContents> contents;
      if (f.regular) {
        contents = read_file_with_identity(f, limit, &refused);
        if (!contents && refused.empty() && !f.dir->stat_entry(f.name)) continue;  // vanished since the scan
      }
      std::string problem;
      if (!f.regular) {
        problem = "not a regular file";
      } else if (!refused.empty()) {
        problem = "untrusted file: " + refused;
      } else if (!contents) {
        problem = f.id.size > limit ? fmt::format("larger than {} bytes", limit) : "unreadable";
      } else {
        const std::string hex = entry_hex_name(f.relative);
        problem = cubin ? cubin_entry_problem(hex, contents->bytes) : tuning_record_problem(hex, contents->bytes);
      }
      if (!problem.empty()) {
        report.skipped.push_back({f.relative, problem, false});
        continue;
      }
      c.write(contents->bytes);
      entries.push_back({f.relative, contents->bytes.size(), sha256_hex(contents->bytes)});
      report.bytes += contents->bytes.size();
      if (cubin) ++report.cubins;
      else ++report.tuning_records;
    }
    c.end();
  }
  AtomicFileWriter out(dir.get(), archive.filename().string(), "cache archive " + archive.string());
  write_container(
      [&](const Sink& sink) {
        ZstdCompressor manifest(sink);
        manifest.write(manifest_prefix(entries));
        manifest.end();
        body.copy_to(sink);
      },
      options.sign_key, [&](std::string_view bytes) { out.write(bytes); });
  report.archive_bytes = out.commit();
  report.is_signed = !options.sign_key.empty();
  return report;
}

ImportReport import_archive(const std::filesystem::path& archive, const std::filesystem::path& root,
                            const ImportOptions& options) {
  ArchiveFileIn file(archive);
  file.verify(options.trusted_keys);

  // Pass 1: check everything; nothing is written.
  ImportReport report;
  report.is_signed = file.is_signed();
  report.signature_verified = file.signature_verified();
  std::set<std::string> dirs;
  {
    ZstdReader in = file.stream();
    for (const ManifestEntry& e : read_manifest(in, file, options)) {
      const std::string bytes = read_checked_file(in, file, e);
      report.bytes += bytes.size();
      if (e.cubin()) ++report.cubins;
      else ++report.tuning_records;
      dirs.insert(split_relative(e.relative).first);
    }
    in.expect_end();
  }

  // Every directory it will write, opened and checked before any file is:
  // an untrusted one (a symlink, another user's) stops the import here.
  const TrustedDir top = TrustedDir::open_root(root, /*create=*/true);
  std::map<std::string, TrustedDir> opened;
  for (const std::string& d : dirs) opened.emplace(d, *top.open_subdir(d, /*create=*/true));

  // Pass 2: publish, re-checking each file (the archive could change under us;
  // then what was published so far was checked, and the rest is not written).
  file.start_publishing();
  try {
    ZstdReader in = file.stream();
    for (const ManifestEntry& e : read_manifest(in, file, options)) {
      const std::string bytes = read_checked_file(in, file, e);
      const auto [dir_name, name] = split_relative(e.relative);
      const TrustedDir& dir = opened.at(dir_name);
      std::string refused;
      const std::optional<TrustedDir::File> existing =
          dir.read_file(name, e.cubin() ? kMaxCubinEntryBytes : kMaxTuningRecordBytes, &refused);
      if (existing && existing->bytes == bytes) {
        ++report.unchanged;
        continue;
      }
      const std::string hex = entry_hex_name(e.relative);
      const bool existing_valid =
          existing && (e.cubin() ? cubin_entry_problem(hex, existing->bytes) : tuning_record_problem(hex, existing->bytes))
                          .empty();
      if (existing_valid && !options.replace) {
        report.conflicts.push_back(e.relative);
        continue;
      }
      dir.write_file(name, bytes);
      ++report.written;
    }
    in.expect_end();
  } catch (const CacheError& e) {
    throw CacheError(fmt::format("importing cache archive {} stopped after {} files were published: {}",
                                 file.name(), report.written + report.unchanged, e.what()));
  }
  return report;
}

}  // namespace jit::cache
