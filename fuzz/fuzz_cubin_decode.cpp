// CubinStore::decode (the cubin cache entry reader) on hostile bytes.
//
// Mode byte: bit 0 set: the key is the next 64 input bytes (any bytes, so
// invalid keys too), else a fixed valid key; bit 1 set: the trailing SHA-256
// is recomputed so that the format, length and metadata checks behind it are
// reached. decode must never throw or crash; a decoded entry must have
// meta["key"] == key and must survive encode -> decode unchanged; and
// cubin_entry_problem (what `cujit-cache verify` reports) must agree.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cache/cubin_store.h"
#include "cache/maintenance.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using jit::cache::CubinStore;
  fuzz::Input in = fuzz::split(data, size);
  std::string key = fuzz::kCubinKey;
  std::string bytes = std::move(in.rest);
  if (in.mode & 1) {
    key = bytes.substr(0, 64);
    bytes.erase(0, key.size());
  }
  if (in.mode & 2) bytes = fuzz::with_trailing_sha256(std::move(bytes));

  const std::optional<jit::cache::CubinEntry> entry = CubinStore::decode(key, bytes);
  const std::string problem = jit::cache::cubin_entry_problem(key, bytes);
  // cubin_entry_problem also checks the payload (a CUDA ELF of the entry's
  // arch); decode checks the container only.
  const bool whole = entry.has_value() && CubinStore::payload_problem(*entry).empty();
  if (whole != problem.empty()) fuzz::violated("cubin_entry_problem disagrees with CubinStore::decode");
  if (!entry) return 0;

  const auto it = entry->meta.find("key");
  if (it == entry->meta.end() || !it->is_string() || it->get<std::string>() != key) {
    fuzz::violated("decoded entry's meta[\"key\"] is not the key asked for");
  }
  // What store() would write for this entry reads back as the same entry.
  const std::string again = CubinStore::encode(key, entry->payload, entry->meta);
  const std::optional<jit::cache::CubinEntry> round = CubinStore::decode(key, again);
  if (!round || round->payload != entry->payload || round->meta != entry->meta) {
    fuzz::violated("encode(decode(x)) does not decode to the same entry");
  }
  return 0;
}
