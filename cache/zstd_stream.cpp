#include "cache/zstd_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cache/fs_detail.h"

namespace jit::cache {

namespace {

constexpr int kCompressionLevel = 6;

std::size_t check(std::size_t ret) {
  if (ZSTD_isError(ret)) throw CacheError(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(ret)));
  return ret;
}

}  // namespace

ZstdCompressor::ZstdCompressor(Sink sink) : cctx_(ZSTD_createCCtx(), &ZSTD_freeCCtx), sink_(std::move(sink)) {
  if (!cctx_) throw CacheError("cannot create a zstd compression context (out of memory)");
  check(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, kCompressionLevel));
  check(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1));
  buf_.resize(ZSTD_CStreamOutSize());
}

void ZstdCompressor::run(std::string_view data, ZSTD_EndDirective mode) {
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  for (;;) {
    ZSTD_outBuffer out{buf_.data(), buf_.size(), 0};
    const std::size_t left = check(ZSTD_compressStream2(cctx_.get(), &out, &in, mode));
    if (out.pos > 0) sink_(std::string_view(buf_.data(), out.pos));
    if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return;
  }
}

ZstdReader::ZstdReader(int fd, std::uint64_t begin, std::uint64_t end, std::string name, ErrorMaker corrupt)
    : fd_(fd), pos_(begin), end_(end), name_(std::move(name)), corrupt_(std::move(corrupt)),
      dctx_(ZSTD_createDCtx(), &ZSTD_freeDCtx) {
  if (!dctx_) throw CacheError("cannot create a zstd decompression context (out of memory)");
  inbuf_.resize(ZSTD_DStreamInSize());
  stage_.resize(ZSTD_DStreamOutSize());
}

void ZstdReader::read(char* dst, std::size_t n, const char* what) {
  while (n > 0) {
    if (stage_pos_ == stage_len_ && !fill()) throw corrupt_(fmt::format("the data ends inside {}", what));
    const std::size_t take = std::min(n, stage_len_ - stage_pos_);
    std::memcpy(dst, stage_.data() + stage_pos_, take);
    stage_pos_ += take;
    dst += take;
    n -= take;
  }
}

void ZstdReader::expect_end() {
  if (stage_pos_ != stage_len_ || fill()) throw corrupt_("there is data after the last file of the manifest");
  if (last_ret_ != 0) throw corrupt_("the compressed stream is incomplete");
}

bool ZstdReader::fill() {
  for (;;) {
    if (in_.pos == in_.size && !pending_) {
      if (pos_ >= end_) return false;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(inbuf_.size(), end_ - pos_));
      pread_all(fd_, inbuf_.data(), n, pos_, name_);
      pos_ += n;
      in_ = ZSTD_inBuffer{inbuf_.data(), n, 0};
    }
    ZSTD_outBuffer out{stage_.data(), stage_.size(), 0};
    const std::size_t in_before = in_.pos;
    const std::size_t ret = ZSTD_decompressStream(dctx_.get(), &out, &in_);
    if (ZSTD_isError(ret)) throw corrupt_(fmt::format("zstd cannot decompress it ({})", ZSTD_getErrorName(ret)));
    last_ret_ = ret;
    const bool had_pending = pending_;
    pending_ = out.pos == out.size;
    stage_pos_ = 0;
    stage_len_ = out.pos;
    if (out.pos > 0) return true;
    if (in_.pos == in_before && in_.pos < in_.size && !had_pending) throw corrupt_("zstd makes no progress on it");
  }
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

}  // namespace jit::cache
