// TuningDb::load (the tuning DB reader) on a record file written from the
// input, and tuning_record_problem (what `cujit-cache verify` and archive
// import check) on the same bytes.
//
// Mode byte: bit 0 set: the input up to the first newline is the tune key
// (as JSON; a fixed key when it does not parse), the rest is the record file;
// else the whole input is the record file for a fixed key. load must never
// throw or crash, and a record it returns must be an object whose "key"
// equals the key asked for.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/maintenance.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path root = [] {
    std::filesystem::create_directories(fuzz::scratch_dir() / "tuning");
    return fuzz::scratch_dir();
  }();
  fuzz::Input in = fuzz::split(data, size);
  nlohmann::json key = fuzz::tune_key();
  std::string text = std::move(in.rest);
  if (in.mode & 1) {
    const std::size_t nl = text.find('\n');
    const std::string key_text = text.substr(0, nl);
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
    nlohmann::json parsed = nlohmann::json::parse(key_text, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) key = std::move(parsed);
  }

  const jit::cache::TuningDb db(root);
  const std::filesystem::path path = db.record_path(key);
  fuzz::write_file(path, text);
  const std::optional<nlohmann::json> record = db.load(key);
  if (record) {
    if (!record->is_object()) fuzz::violated("TuningDb::load returned a non-object");
    const auto it = record->find("key");
    if (it == record->end() || *it != key) fuzz::violated("TuningDb::load returned a record for another key");
  }
  // Never throws; says why the bytes are not a record for this key, or "".
  (void)jit::cache::tuning_record_problem(path.stem().string(), text);
  return 0;
}
