// Cubin metadata readers: the input is the metadata text of an otherwise
// valid cache entry (right magic, lengths and checksum, so every input
// reaches the JSON), planted in a cache directory under its key; then
// CubinStore::decode, list_cubins and cache_stats (`cujit-cache ls/stats`),
// and what cujit-sass reads from an entry (variant, arch and spill fields
// through the typed accessors, the --save-sass file name).
//
// Mode byte: unused. Nothing may throw; a listed entry is valid exactly when
// decode accepts it; the --save-sass name is one path component.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "cache/bounded_json.h"
#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "cache/safe_path.h"
#include "fuzz_support.h"

namespace {

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// The entry layout of cache/cubin_store.h around raw metadata text.
std::string entry_with_metadata(const std::string& meta_text, const std::string& payload) {
  std::string bytes("CUJITCB\0", 8);
  put_le(bytes, jit::cache::kCubinFormatVersion, 4);
  put_le(bytes, meta_text.size(), 8);
  bytes += meta_text;
  put_le(bytes, payload.size(), 8);
  bytes += payload;
  return fuzz::with_trailing_sha256(bytes + std::string(32, '\0'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path root = fuzz::scratch_dir() / "metadata-cache";
  const fuzz::Input in = fuzz::split(data, size);
  const std::string& key = fuzz::kCubinKey;
  const std::string bytes = entry_with_metadata(in.rest, "\x7f" "ELF");
  const jit::cache::CubinStore store(root);
  std::filesystem::create_directories(store.entry_path(key).parent_path());
  fuzz::write_file(store.entry_path(key), bytes);

  const std::optional<jit::cache::CubinEntry> entry = jit::cache::CubinStore::decode(key, bytes);
  const std::vector<jit::cache::CubinInfo> listed = jit::cache::list_cubins(root);
  // list_cubins calls an entry valid when its container decodes and its
  // payload is a CUDA ELF of the metadata's arch.
  const bool valid = entry.has_value() && jit::cache::CubinStore::payload_problem(*entry).empty();
  if (listed.size() != 1 || listed[0].valid != valid) fuzz::violated("list_cubins disagrees with decode");
  (void)jit::cache::cache_stats(root);
  (void)jit::cache::dump_for_output(jit::cache::to_json(listed[0]));
  if (entry) {
    // cujit-sass's reads.
    const std::string variant = jit::cache::string_field(entry->meta, "variant").value;
    const std::string arch = jit::cache::string_field(entry->meta, "arch").value;
    (void)jit::cache::integer_field(entry->meta, "spill_store_bytes");
    (void)jit::cache::integer_field(entry->meta, "spill_load_bytes");
    const std::string name = jit::cache::safe_file_name(variant + "." + arch + ".sass");
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      fuzz::violated("the --save-sass name is not one safe path component");
    }
  }
  return 0;
}
