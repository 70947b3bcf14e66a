#include "cache/archive.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/atomic_file.h"
#include "cache/bounded_json.h"
#include "cache/cache_dir.h"
#include "cache/cache_error.h"
#include "cache/cache_scan.h"
#include "cache/fs_detail.h"
#include "cache/sha256.h"

namespace jit::cache {

namespace {

constexpr char kMagic[8] = {'C', 'U', 'J', 'I', 'T', 'A', 'R', '\0'};
constexpr std::size_t kHeaderLen = sizeof kMagic + 4;
constexpr std::size_t kTrailerLen = 32;
constexpr const char* kFormatName = "cujit-cache-archive";
constexpr int kCompressionLevel = 6;

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

// Incremental SHA-256 (the whole-archive checksum is computed while streaming).
class Sha256Stream {
 public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) fail();
  }
  void update(const void* data, std::size_t n) {
    if (n > 0 && EVP_DigestUpdate(ctx_.get(), data, n) != 1) fail();
  }
  Digest finish() {
    Digest d{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), d.data(), &len) != 1 || len != d.size()) fail();
    return d;
  }

 private:
  [[noreturn]] static void fail() {
    throw CacheError("SHA-256 failed in OpenSSL (EVP_Digest*); check the OpenSSL installation and configuration");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

using Sink = std::function<void(const char*, std::size_t)>;

// Streams bytes into one zstd frame (content checksum on).
class Compressor {
 public:
  explicit Compressor(Sink sink) : cctx_(ZSTD_createCCtx(), &ZSTD_freeCCtx), sink_(std::move(sink)) {
    if (!cctx_) throw CacheError("cannot create a zstd compression context (out of memory)");
    check(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, kCompressionLevel));
    check(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1));
    buf_.resize(ZSTD_CStreamOutSize());
  }
  void write(std::string_view data) { run(data, ZSTD_e_continue); }
  void end() { run({}, ZSTD_e_end); }

 private:
  static std::size_t check(std::size_t ret) {
    if (ZSTD_isError(ret)) throw CacheError(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(ret)));
    return ret;
  }
  void run(std::string_view data, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{buf_.data(), buf_.size(), 0};
      const std::size_t left = check(ZSTD_compressStream2(cctx_.get(), &out, &in, mode));
      if (out.pos > 0) sink_(buf_.data(), out.pos);
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return;
    }
  }
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx_;
  Sink sink_;
  std::string buf_;
};

struct ManifestEntry {
  std::string relative;
  std::uint64_t size = 0;
  std::string sha256;
};

std::string manifest_text(const std::vector<ManifestEntry>& entries) {
  nlohmann::json files = nlohmann::json::array();
  for (const ManifestEntry& e : entries) files.push_back({{"path", e.relative}, {"size", e.size}, {"sha256", e.sha256}});
  const nlohmann::json manifest = {{"format", kFormatName}, {"version", kArchiveFormatVersion}, {"files", files}};
  return manifest.dump();
}

std::string header_bytes() {
  std::string h(kMagic, sizeof kMagic);
  put_u32(h, kArchiveFormatVersion);
  return h;
}

// u64 length + manifest, as the first bytes of the decompressed stream.
std::string manifest_prefix(const std::vector<ManifestEntry>& entries) {
  const std::string text = manifest_text(entries);
  std::string out;
  put_u64(out, text.size());
  out += text;
  return out;
}

void write_all(int fd, const char* p, std::size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw CacheError(fmt::format("{}: write failed: {}", what, detail::errno_text(errno)));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void pread_all(int fd, char* p, std::size_t n, std::uint64_t offset, const std::string& what) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw CacheError(fmt::format("{}: read failed: {}", what, detail::errno_text(errno)));
    }
    if (r == 0) throw CacheError(fmt::format("{}: the file ended early (it changed while being read)", what));
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// ---------------------------------------------------------------- reading

// The archive opened for import: header checked, and the whole-file checksum.
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
    if (size_ < kHeaderLen + kTrailerLen) throw corrupt("it is truncated (shorter than its header and checksum)");
  }

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  std::uint64_t stream_begin() const { return kHeaderLen; }
  std::uint64_t stream_end() const { return size_ - kTrailerLen; }

  // Every byte before the trailer against the trailer: catches any flipped,
  // missing or extra byte before anything is decompressed.
  void verify_checksum() const {
    Sha256Stream sha;
    std::string buf(1 << 16, '\0');
    for (std::uint64_t pos = 0; pos < stream_end();) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), stream_end() - pos));
      pread_all(fd_.get(), buf.data(), n, pos, name_);
      sha.update(buf.data(), n);
      pos += n;
    }
    char trailer[kTrailerLen];
    pread_all(fd_.get(), trailer, kTrailerLen, stream_end(), name_);
    const Digest d = sha.finish();
    if (std::memcmp(d.data(), trailer, kTrailerLen) != 0) {
      throw corrupt("its SHA-256 checksum does not match (the file is truncated or has changed bytes)");
    }
  }

  CacheError corrupt(const std::string& what) const {
    return CacheError(fmt::format("cache archive {} is corrupt: {}{}", name_, what, outcome()));
  }
  // How a rejection ends: before publishing starts, nothing was written.
  std::string outcome() const { return publishing_ ? "" : "; nothing was imported"; }
  void start_publishing() { publishing_ = true; }

 private:
  std::string name_;
  Fd fd_;
  std::uint64_t size_ = 0;
  bool publishing_ = false;
};

// The decompressed stream of an archive, read in order.
class StreamReader {
 public:
  explicit StreamReader(const ArchiveFileIn& file)
      : file_(file), dctx_(ZSTD_createDCtx(), &ZSTD_freeDCtx), pos_(file.stream_begin()) {
    if (!dctx_) throw CacheError("cannot create a zstd decompression context (out of memory)");
    inbuf_.resize(ZSTD_DStreamInSize());
    stage_.resize(ZSTD_DStreamOutSize());
  }

  // Exactly n bytes, or CacheError (truncated / corrupt).
  void read(char* dst, std::size_t n, const char* what) {
    while (n > 0) {
      if (stage_pos_ == stage_len_ && !fill()) {
        throw file_.corrupt(fmt::format("the data ends inside {}", what));
      }
      const std::size_t take = std::min(n, stage_len_ - stage_pos_);
      std::memcpy(dst, stage_.data() + stage_pos_, take);
      stage_pos_ += take;
      dst += take;
      n -= take;
    }
  }

  // Nothing may follow the last file, and the zstd frame must be complete.
  void expect_end() {
    if (stage_pos_ != stage_len_ || fill()) throw file_.corrupt("there is data after the last file of the manifest");
    if (last_ret_ != 0) throw file_.corrupt("the compressed stream is incomplete");
  }

 private:
  bool fill() {
    for (;;) {
      if (in_.pos == in_.size && !pending_) {
        if (pos_ >= file_.stream_end()) return false;
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(inbuf_.size(), file_.stream_end() - pos_));
        pread_all(file_.fd(), inbuf_.data(), n, pos_, file_.name());
        pos_ += n;
        in_ = ZSTD_inBuffer{inbuf_.data(), n, 0};
      }
      ZSTD_outBuffer out{stage_.data(), stage_.size(), 0};
      const std::size_t in_before = in_.pos;
      const std::size_t ret = ZSTD_decompressStream(dctx_.get(), &out, &in_);
      if (ZSTD_isError(ret)) {
        throw file_.corrupt(fmt::format("zstd cannot decompress it ({})", ZSTD_getErrorName(ret)));
      }
      last_ret_ = ret;
      const bool had_pending = pending_;
      pending_ = out.pos == out.size;
      stage_pos_ = 0;
      stage_len_ = out.pos;
      if (out.pos > 0) return true;
      if (in_.pos == in_before && in_.pos < in_.size && !had_pending) {
        throw file_.corrupt("zstd makes no progress on it");
      }
    }
  }

  const ArchiveFileIn& file_;
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx_;
  std::uint64_t pos_;
  std::string inbuf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  std::string stage_;
  std::size_t stage_pos_ = 0, stage_len_ = 0;
  bool pending_ = false;
  std::size_t last_ret_ = 0;
};

bool is_lower_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Reads and validates the manifest (paths, sizes, hashes, duplicates).
std::vector<ManifestEntry> read_manifest(StreamReader& in, const ArchiveFileIn& file) {
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
      throw CacheError(fmt::format(
          "cache archive {} is rejected: its manifest names the path {}, and only cubin/xx/<64 hex>.cubin and "
          "tuning/<64 hex>.json are accepted (no '..', no absolute paths, nothing else){}",
          file.name(), nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          file.outcome()));
    }
    if (!seen.insert(e.relative).second) throw file.corrupt(fmt::format("its manifest lists {} twice", e.relative));
    if (size == f.end() || !size->is_number_unsigned()) {
      throw file.corrupt(fmt::format("the manifest entry {} has no unsigned \"size\"", e.relative));
    }
    e.size = size->get<std::uint64_t>();
    if (e.size > kArchiveMaxFileBytes) {
      throw file.corrupt(fmt::format("the manifest entry {} claims {} bytes (at most {} are accepted)", e.relative,
                                     e.size, kArchiveMaxFileBytes));
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
std::string read_checked_file(StreamReader& in, const ArchiveFileIn& file, const ManifestEntry& e) {
  std::string bytes(static_cast<std::size_t>(e.size), '\0');
  in.read(bytes.data(), bytes.size(), e.relative.c_str());
  if (sha256_hex(bytes) != e.sha256) {
    throw file.corrupt(fmt::format("{} does not match its SHA-256 in the manifest", e.relative));
  }
  const std::string hex = entry_hex_name(e.relative);
  const bool cubin = classify_relative_path(e.relative) == CacheFileKind::cubin;
  const std::string problem = cubin ? cubin_entry_problem(hex, bytes) : tuning_record_problem(hex, bytes);
  if (!problem.empty()) {
    throw file.corrupt(fmt::format("{} is not a valid {}: {}", e.relative, cubin ? "cubin entry" : "tuning record",
                                   problem));
  }
  return bytes;
}

// ---------------------------------------------------------------- writing

// The archive file being written: a temp file beside it, renamed on commit;
// hashes everything written for the trailer.
class ArchiveFileOut {
 public:
  explicit ArchiveFileOut(const std::filesystem::path& path) : path_(path) {
    std::filesystem::path dir = path.parent_path();
    if (dir.empty()) dir = ".";
    std::string tmpl = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
    fd_.reset(::mkstemp(tmpl.data()));
    if (fd_.get() < 0) {
      throw CacheError(fmt::format("cannot write cache archive {}: creating a temp file in {} failed: {}",
                                   path.string(), dir.string(), detail::errno_text(errno)));
    }
    tmp_ = tmpl;
  }
  ~ArchiveFileOut() {
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  ArchiveFileOut(const ArchiveFileOut&) = delete;
  ArchiveFileOut& operator=(const ArchiveFileOut&) = delete;

  void write(const char* p, std::size_t n) {
    sha_.update(p, n);
    write_all(fd_.get(), p, n, what());
    size_ += n;
  }

  // Appends the checksum, syncs and renames over the target; returns the size.
  std::uint64_t commit() {
    const Digest d = sha_.finish();
    write_all(fd_.get(), reinterpret_cast<const char*>(d.data()), d.size(), what());
    size_ += d.size();
    while (::fsync(fd_.get()) != 0) {
      if (errno != EINTR) throw CacheError(fmt::format("{}: fsync failed: {}", what(), detail::errno_text(errno)));
    }
    if (::close(fd_.release()) != 0 && errno != EINTR) {
      throw CacheError(fmt::format("{}: close failed: {}", what(), detail::errno_text(errno)));
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      throw CacheError(fmt::format("{}: rename over the target failed: {}", what(), detail::errno_text(errno)));
    }
    tmp_.clear();
    return size_;
  }

 private:
  std::string what() const { return fmt::format("cannot write cache archive {}", path_.string()); }
  std::filesystem::path path_;
  std::string tmp_;
  Fd fd_;
  Sha256Stream sha_;
  std::uint64_t size_ = 0;
};

// An anonymous scratch file (created beside the archive, unlinked at once)
// that holds the compressed file bytes until the manifest is known.
class ScratchFile {
 public:
  explicit ScratchFile(const std::filesystem::path& archive) {
    std::filesystem::path dir = archive.parent_path();
    if (dir.empty()) dir = ".";
    std::string tmpl = (dir / ("." + archive.filename().string() + ".body.XXXXXX")).string();
    fd_.reset(::mkstemp(tmpl.data()));
    if (fd_.get() < 0) {
      throw CacheError(fmt::format("cannot write cache archive {}: creating a scratch file in {} failed: {}",
                                   archive.string(), dir.string(), detail::errno_text(errno)));
    }
    ::unlink(tmpl.c_str());
    what_ = fmt::format("cannot write cache archive {} (scratch file)", archive.string());
  }
  void write(const char* p, std::size_t n) {
    write_all(fd_.get(), p, n, what_);
    size_ += n;
  }
  void copy_to(ArchiveFileOut& out) const {
    std::string buf(1 << 16, '\0');
    for (std::uint64_t pos = 0; pos < size_;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size_ - pos));
      pread_all(fd_.get(), buf.data(), n, pos, what_);
      out.write(buf.data(), n);
      pos += n;
    }
  }

 private:
  Fd fd_;
  std::string what_;
  std::uint64_t size_ = 0;
};

}  // namespace

std::string encode_archive(const std::vector<ArchiveFile>& files) {
  std::vector<ManifestEntry> entries;
  for (const ArchiveFile& f : files) entries.push_back({f.relative, f.bytes.size(), sha256_hex(f.bytes)});
  std::string out = header_bytes();
  {
    Compressor c([&](const char* p, std::size_t n) { out.append(p, n); });
    c.write(manifest_prefix(entries));
    c.end();
  }
  {
    Compressor c([&](const char* p, std::size_t n) { out.append(p, n); });
    for (const ArchiveFile& f : files) c.write(f.bytes);
    c.end();
  }
  const Digest d = sha256(out);
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

ExportReport export_archive(const std::filesystem::path& root, const std::filesystem::path& archive) {
  ExportReport report;
  ScratchFile body(archive);
  std::vector<ManifestEntry> entries;
  {
    Compressor c([&](const char* p, std::size_t n) { body.write(p, n); });
    for (const CacheFile& f : scan_cache(root).files) {
      if (f.kind != CacheFileKind::cubin && f.kind != CacheFileKind::tuning) continue;
      const bool cubin = f.kind == CacheFileKind::cubin;
      std::optional<FileContents> contents;
      if (f.regular) {
        contents = read_file_with_identity(f.path);
        if (!contents && ::access(f.path.c_str(), F_OK) != 0) continue;  // vanished since the scan
      }
      std::string problem;
      if (!contents) {
        problem = f.regular ? "unreadable" : "not a regular file";
      } else if (contents->bytes.size() > kArchiveMaxFileBytes) {
        problem = fmt::format("larger than {} bytes", kArchiveMaxFileBytes);
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
  ArchiveFileOut out(archive);
  const std::string header = header_bytes();
  out.write(header.data(), header.size());
  {
    Compressor c([&](const char* p, std::size_t n) { out.write(p, n); });
    c.write(manifest_prefix(entries));
    c.end();
  }
  body.copy_to(out);
  report.archive_bytes = out.commit();
  return report;
}

ImportReport import_archive(const std::filesystem::path& archive, const std::filesystem::path& root) {
  ArchiveFileIn file(archive);
  file.verify_checksum();

  // Pass 1: check everything; nothing is written.
  ImportReport report;
  {
    StreamReader in(file);
    for (const ManifestEntry& e : read_manifest(in, file)) {
      const std::string bytes = read_checked_file(in, file, e);
      report.bytes += bytes.size();
      if (classify_relative_path(e.relative) == CacheFileKind::cubin) ++report.cubins;
      else ++report.tuning_records;
    }
    in.expect_end();
  }

  // Pass 2: publish, re-checking each file (the archive could change under us;
  // then what was published so far was checked, and the rest is not written).
  ensure_private_dir(root);
  file.start_publishing();
  try {
    StreamReader in(file);
    const std::vector<ManifestEntry> entries = read_manifest(in, file);
    for (const ManifestEntry& e : entries) {
      const std::string bytes = read_checked_file(in, file, e);
      const std::filesystem::path dest = root / e.relative;
      if (auto existing = read_regular_file(dest); existing && *existing == bytes) {
        ++report.unchanged;
        continue;
      }
      ensure_private_dir(dest.parent_path());
      write_file_atomic(dest, bytes);
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
