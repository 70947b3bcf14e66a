// zstd streaming over file descriptors, as cache archives use it: one frame
// written through a sink, and a byte range of a file read back decompressed.
// Plus the whole-buffer write/pread loops both directions need.
#pragma once
#include <zstd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cache/cache_error.h"

namespace jit::cache {

using Sink = std::function<void(std::string_view)>;

// Streams bytes into one zstd frame (content checksum on) handed to `sink`.
class ZstdCompressor {
 public:
  explicit ZstdCompressor(Sink sink);
  void write(std::string_view data) { run(data, ZSTD_e_continue); }
  void end() { run({}, ZSTD_e_end); }

 private:
  void run(std::string_view data, ZSTD_EndDirective mode);
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx_;
  Sink sink_;
  std::string buf_;
};

// The zstd frames in bytes [begin, end) of the file open on `fd`, read in
// order. `corrupt` makes the error for a stream that is truncated, invalid or
// followed by extra data (the caller names its file and outcome).
class ZstdReader {
 public:
  using ErrorMaker = std::function<CacheError(const std::string&)>;
  ZstdReader(int fd, std::uint64_t begin, std::uint64_t end, std::string name, ErrorMaker corrupt);

  // Exactly n bytes, or the `corrupt` error naming `what`.
  void read(char* dst, std::size_t n, const char* what);
  // Nothing may follow, and the last frame must be complete.
  void expect_end();

 private:
  bool fill();
  int fd_;
  std::uint64_t pos_, end_;
  std::string name_;
  ErrorMaker corrupt_;
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx_;
  std::string inbuf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  std::string stage_;
  std::size_t stage_pos_ = 0, stage_len_ = 0;
  bool pending_ = false;
  std::size_t last_ret_ = 0;
};

// write() until all of p[0, n) is written; CacheError "<what>: write failed".
void write_all(int fd, const char* p, std::size_t n, const std::string& what);
// pread() until n bytes at offset are read; CacheError when it fails or ends early.
void pread_all(int fd, char* p, std::size_t n, std::uint64_t offset, const std::string& what);

}  // namespace jit::cache
