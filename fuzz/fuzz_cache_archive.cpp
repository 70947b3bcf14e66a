// The cache archive importer (`cujit-cache import`) on hostile archives.
// cache/archive.h has no in-memory import, so each input is written to a
// file and imported into a fresh directory.
//
// Mode byte, modulo 3:
//   0  the input is the archive file as is;
//   1  the same with its trailing SHA-256 recomputed (reaches the zstd stream);
//   2  the input is the decompressed stream (u64 manifest length, manifest
//      JSON, file bytes): the harness compresses it and adds the header and
//      checksum, so mutations reach the manifest and entry checks directly.
// import_archive must throw only CacheError; a rejected archive must leave the
// import directory absent (nothing written); an accepted one must leave only
// entries that verify_cache finds valid.
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "cache/archive.h"
#include "cache/cache_error.h"
#include "cache/maintenance.h"
#include "fuzz_support.h"

namespace {

std::string wrap_stream(const std::string& stream) {
  std::string out("CUJITAR\0", 8);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((jit::cache::kArchiveFormatVersion >> (8 * i)) & 0xFF));
  std::string z(ZSTD_compressBound(stream.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  const std::size_t n = ZSTD_compress2(cctx, z.data(), z.size(), stream.data(), stream.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) fuzz::violated("harness: zstd compression failed");
  out.append(z.data(), n);
  return fuzz::with_trailing_sha256(out + std::string(32, '\0'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path archive = fuzz::scratch_dir() / "in.cujit";
  static const fs::path root = fuzz::scratch_dir() / "root";
  fuzz::Input in = fuzz::split(data, size);
  std::string bytes;
  switch (in.mode % 3) {
    case 0: bytes = std::move(in.rest); break;
    case 1: bytes = fuzz::with_trailing_sha256(std::move(in.rest)); break;
    default: bytes = wrap_stream(in.rest); break;
  }
  fuzz::write_file(archive, bytes);

  std::error_code ec;
  fs::remove_all(root, ec);
  bool imported = false;
  try {
    jit::cache::import_archive(archive, root);
    imported = true;
  } catch (const jit::cache::CacheError&) {
  }
  if (!imported) {
    if (fs::exists(root)) fuzz::violated("a rejected archive wrote into the import directory");
    return 0;
  }
  const jit::cache::VerifyReport report = jit::cache::verify_cache(root, /*remove_bad=*/false);
  if (!report.bad.empty()) fuzz::violated("an accepted archive left an entry that cujit-cache verify rejects");
  fs::remove_all(root, ec);
  return 0;
}
