// The cache scan and everything built on it (`cujit-cache ls`, `stats`,
// `verify`, `export`, `clear`) over a cache tree the input builds: shard
// directories with odd names, entries valid and not, tuning records,
// symbolic links (to files and directories outside the cache, `cubin` and
// `tuning` themselves included), FIFOs, directories of any mode.
//
// Input (after the mode byte, unused): 3-byte operations (op, a, b) plus the
// data some take from what follows.
// Only CacheError may escape; nothing outside the cache root (a directory
// beside it holding a valid entry, a record and a file, and whatever the
// input put there through links) is changed, even by verify's removals and
// clear, also when `cubin`, `tuning` or a shard directory is itself a link
// out (the trusted directory handle never opens through one).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cache/archive.h"
#include "cache/cache_error.h"
#include "cache/cache_scan.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "fuzz_support.h"

namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string text;
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    out[fs::relative(e.path(), dir).string()] = text;
  }
  return out;
}

// Writes a file of the tree, skipping what cannot be written: a FIFO, a
// directory or a link already at the name (never opened through).
void plant(const fs::path& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return;
  (void)!::write(fd, bytes.data(), bytes.size());
  ::close(fd);
}

std::string key_for(std::uint8_t a) { return jit::cache::sha256_hex(std::string(1, static_cast<char>(a))); }

// Shard directory names: right ones, wrong ones and hostile ones.
std::string shard_name(std::uint8_t a) {
  static const char* const odd[] = {"..", ".", "zz", "ABC", ".hidden", "a b", "0"};
  if (a < 200) return key_for(a).substr(0, 2);
  return odd[a % 7];
}

std::string entry_name(std::uint8_t a, std::uint8_t b) {
  switch (b % 5) {
    case 0: return key_for(a) + ".cubin";
    case 1: return "." + key_for(a) + ".cubin.tmp.1.0000000000000000";
    case 2: return key_for(a) + ".json";
    case 3: return key_for(a).substr(0, 63) + ".cubin";
    default: return "x.cubin";
  }
}

void chmod_all(const fs::path& root) {
  std::error_code ec;
  ::chmod(root.c_str(), 0700);
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path base = fuzz::scratch_dir() / "scan";
  const fs::path root = base / "cache", outside = base / "outside";
  std::error_code ec;
  if (fs::exists(root, ec)) chmod_all(root);
  fs::remove_all(base, ec);
  fs::create_directories(outside / "cubin" / "ab");
  ::chmod(base.c_str(), 0700);
  const std::string valid_key = key_for(1);
  const std::string valid_entry = jit::cache::CubinStore::encode(valid_key, "\x7f" "ELF", {{"variant", "v"}});
  fuzz::write_file(outside / "entry.cubin", valid_entry);
  fuzz::write_file(outside / "record.json", "{\"key\": 1}");
  fuzz::write_file(outside / "keep", "keep");
  fs::create_directories(root);
  ::chmod(root.c_str(), 0700);

  const std::string input = fuzz::split(data, size).rest;
  for (std::size_t pos = 0; pos + 3 <= input.size(); pos += 3) {
    const auto op = static_cast<std::uint8_t>(input[pos]), a = static_cast<std::uint8_t>(input[pos + 1]),
               b = static_cast<std::uint8_t>(input[pos + 2]);
    const fs::path shard = root / "cubin" / shard_name(a);
    const fs::path tuning = root / "tuning";
    switch (op % 8) {
      case 0: fs::create_directories(shard, ec); break;
      case 1: {  // a file of b % 64 bytes taken from the input
        const std::size_t n = std::min<std::size_t>(b % 64, input.size() - pos - 3);
        fs::create_directories(shard, ec);
        if (!ec) plant(shard / entry_name(a, b), input.substr(pos + 3, n));
        pos += n;
        break;
      }
      case 2: {  // a symbolic link at an entry or record name
        fs::create_directories(b & 1 ? tuning : shard, ec);
        const fs::path at = (b & 1 ? tuning : shard) / entry_name(a, b >> 1);
        const fs::path to = b & 2 ? outside / "entry.cubin" : b & 4 ? outside / "record.json" : outside;
        ::symlink(to.c_str(), at.c_str());
        break;
      }
      case 3: fs::create_directories(shard, ec); ::mkfifo((shard / entry_name(a, b)).c_str(), 0600); break;
      case 4: {  // a tuning record (any bytes) under a hex name
        const std::size_t n = std::min<std::size_t>(b % 64, input.size() - pos - 3);
        fs::create_directories(tuning, ec);
        if (!ec) plant(tuning / (key_for(a) + (b & 1 ? ".json" : ".tmp")), input.substr(pos + 3, n));
        pos += n;
        break;
      }
      case 5:  // never through a link: the harness must not change what is outside
        ::fchmodat(AT_FDCWD, (a & 1 ? shard : a & 2 ? tuning : root / "cubin").c_str(), b & 1 ? 0777 : b & 2 ? 0500 : 0,
                   AT_SYMLINK_NOFOLLOW);
        break;
      case 6: {  // cubin/, tuning/ or a shard directory is itself a link out
        const fs::path at = a % 3 == 0 ? root / "cubin" : a % 3 == 1 ? tuning : shard;
        fs::create_directories(at.parent_path(), ec);
        (void)::symlink((a % 3 == 2 ? outside / "cubin" / "ab" : outside).c_str(), at.c_str());
        break;
      }
      default: {  // a valid entry at its path
        fs::create_directories(root / "cubin" / key_for(a).substr(0, 2), ec);
        plant(root / "cubin" / key_for(a).substr(0, 2) / (key_for(a) + ".cubin"),
              jit::cache::CubinStore::encode(key_for(a), "\x7f" "ELF", {{"variant", "v"}}));
      }
    }
  }

  const auto before = snapshot(outside);  // after the build: its own writes may go through links
  auto guarded = [](auto&& f) {
    try {
      f();
    } catch (const jit::cache::CacheError&) {
      // refusing a hostile tree is fine
    }
  };
  guarded([&] { (void)jit::cache::scan_cache(root); });
  guarded([&] { (void)jit::cache::list_cubins(root); });
  guarded([&] { (void)jit::cache::cache_stats(root); });
  guarded([&] { (void)jit::cache::export_archive(root, base / "out.cujit"); });
  guarded([&] { (void)jit::cache::verify_cache(root, /*remove_bad=*/true); });
  guarded([&] { (void)jit::cache::clear_cache(root); });
  if (snapshot(outside) != before) {
    fuzz::violated("a cache operation changed a file outside the cache root");
  }
  return 0;
}
