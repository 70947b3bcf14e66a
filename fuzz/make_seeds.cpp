// Writes the seed corpora of the fuzz targets: valid inputs made with the
// library's own encoders (so checksums and keys are right for this version),
// plus a few near misses. Usage: cujit_fuzz_seeds OUTDIR; writes
// OUTDIR/<target>/seed-<n> for each target (mode byte first, see each target).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/archive.h"
#include "cache/cubin_store.h"
#include "tests/support/fake_cubin.h"
#include "cache/sha256.h"
#include "fuzz_support.h"

namespace fs = std::filesystem;
using jit::cache::CubinStore;
using nlohmann::json;

namespace {

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

class Corpus {
 public:
  Corpus(const fs::path& root, const std::string& target) : dir_(root / target) { fs::create_directories(dir_); }
  void add(std::uint8_t mode, const std::string& bytes) {
    fuzz::write_file(dir_ / ("seed-" + std::to_string(n_++)), std::string(1, static_cast<char>(mode)) + bytes);
  }

 private:
  fs::path dir_;
  int n_ = 0;
};

// A CUDA ELF header for the arch cubin_meta names, so archives built from
// these seeds pass import's payload check and reach what lies behind it.
std::string payload(const std::string& name, int n) {
  std::string p = jit::test::fake_cubin("sm_90a", "cubin of " + name);
  for (int i = 0; i < n; ++i) p += static_cast<char>((i * 31 + 7) & 0xFF);
  return p;
}

json cubin_meta(const std::string& variant) {
  return {{"variant", variant}, {"arch", "sm_90a"}, {"family", "attention"}, {"lowered_name", "_Z8attn_fwdILi64EEvv"},
          {"registers", 128}, {"spill_bytes", 0}, {"shared_bytes", 49152}};
}

// 200,000 levels of arrays: the depth that overflowed the stack of the JSON
// serializer in cujit-cache, cujit-warmup and the tuner.
std::string nested(std::size_t depth = 200000, const std::string& inside = "1") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

// A record as autotune::make_record writes it, its last candidate's `odd_field`
// set to `odd_value` (raw JSON text) when given.
std::string timed_record_text(const json& key, const std::string& odd_field = "", const std::string& odd_value = "") {
  std::string text = R"({"key": )" + key.dump() + R"(, "winner": {"bm": 128, "bn": 64}, "candidates": [)" +
                     R"({"config": {"bm": 64, "bn": 64}, "variant": "attn_bm64", "median_us": 12.5}, )" +
                     R"({"config": {"bm": 128, "bn": 64}, "variant": "attn_bm128", "error": "too many registers"}, )";
  const std::string last = R"({"config": {"bm": 128, "bn": 64}, "variant": "attn_bm128_bn64", )";
  if (odd_field.empty()) return text + last + R"("median_us": 9.75}]})";
  return text + last + "\"" + odd_field + "\": " + odd_value + "}]}";
}

// Validation input of fuzz_validate_attention: per tensor address, dtype,
// shape, strides; then flags, scale, lse.
struct FuzzTensor {
  std::uint64_t data;
  std::int64_t shape[4];
  std::int64_t strides[4];
};
std::string validation_input(const FuzzTensor (&t)[4]) {
  std::string out;
  auto put = [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); };
  for (const FuzzTensor& x : t) {
    put(&x.data, 8);
    out.push_back('\0');  // f16
    put(x.shape, 32);
    put(x.strides, 32);
  }
  out.push_back('\0');  // no flags
  const float scale = 0;
  put(&scale, 4);
  const std::uint64_t lse = 0;
  put(&lse, 8);
  return out;
}
FuzzTensor contiguous(std::uint64_t data, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return {data, {b, h, s, d}, {h * s * d, s * d, d, 1}};
}

std::string tuning_record_text(const json& key) {
  json record = {{"winner", {{"bm", 128}, {"bn", 64}, {"stages", 2}, {"warps", 4}}},
                 {"candidates", json::array({{{"config", {{"bm", 64}, {"bn", 64}}}, {"ms", 0.125}},
                                             {{"config", {{"bm", 128}, {"bn", 64}}}, {"ms", 0.0931}}})}};
  record["key"] = key;
  return record.dump(1) + "\n";  // as TuningDb::store writes it
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];

  // fuzz_cubin_decode: bit 0 = key from the input, bit 1 = checksum fix-up.
  {
    Corpus c(out, "cubin_decode");
    const std::string key = fuzz::kCubinKey;
    const std::string entry = CubinStore::encode(key, payload("a", 64), cubin_meta("attn_fwd_d64_bm128"));
    c.add(0, entry);
    c.add(2, entry);
    c.add(0, CubinStore::encode(key, "", json::object()));
    const std::string other = jit::cache::sha256_hex("other");
    c.add(1, other + CubinStore::encode(other, payload("b", 300), cubin_meta("attn_fwd_d128_bm64")));
    c.add(3, other + CubinStore::encode(key, payload("c", 16), cubin_meta("attn_fwd_d64_bm64")));  // key mismatch
  }

  // fuzz_tuning_db: bit 0 = first line is the key.
  {
    Corpus c(out, "tuning_db");
    c.add(0, tuning_record_text(fuzz::tune_key()));
    const json key = {{"family", "row_softmax"}, {"arch", "sm_80"}, {"device", "NVIDIA A100"}, {"cols", 4096}};
    c.add(1, key.dump() + "\n" + tuning_record_text(key));
    c.add(1, key.dump() + "\n" + tuning_record_text(fuzz::tune_key()));  // another key's record
    c.add(0, "{\"key\": null}\n");
    // Regressions (issue 17): a 200,000-deep config; a key nested as deep.
    c.add(0, R"({"key": )" + fuzz::tune_key().dump() + R"(, "candidates": [{"config": )" + nested() + "}]}");
    c.add(1, nested() + "\n" + R"({"key": )" + nested() + "}");
  }

  // fuzz_tuning_record: the record file for the fixed key (mode unused).
  {
    Corpus c(out, "tuning_record");
    const json key = fuzz::tune_key();
    c.add(0, timed_record_text(key));
    // Regressions (issue 17): mistyped and non-finite timings, a nested config.
    c.add(0, timed_record_text(key, "median_us", "\"fast\""));
    c.add(0, timed_record_text(key, "median_us", "null"));  // an infinite time as nlohmann wrote it
    c.add(0, timed_record_text(key, "median_us", "1e999"));
    c.add(0, timed_record_text(key, "variant", "5"));
    c.add(0, timed_record_text(key, "error", "[]"));
    c.add(0, R"({"key": )" + key.dump() + R"(, "candidates": [{"config": )" + nested() + "}]}");
    c.add(0, R"({"key": )" + key.dump() + R"(, "candidates": "all"})");
  }

  // fuzz_cubin_metadata: the metadata text of an entry (mode unused).
  {
    Corpus c(out, "cubin_metadata");
    json meta = cubin_meta("attn_fwd_d64_bm128");
    meta["key"] = fuzz::kCubinKey;
    c.add(0, meta.dump());
    // Regressions (issue 17): a variant of the wrong type, a name that climbs
    // out of --save-sass's directory, deep nesting, a non-UTF-8 name.
    meta["variant"] = 5;
    c.add(0, meta.dump());
    meta["variant"] = "../escaped_sass";
    c.add(0, meta.dump());
    meta["variant"] = "v";
    meta["spill_store_bytes"] = "many";
    c.add(0, meta.dump());
    c.add(0, R"({"key": ")" + fuzz::kCubinKey + R"(", "variant": )" + nested() + "}");
    c.add(0, R"({"key": ")" + fuzz::kCubinKey + "\", \"variant\": \"caf\xe9\"}");
  }

  // fuzz_knobs: mode % 8 picks the knob, the rest is its value.
  {
    Corpus c(out, "knobs");
    const char* const values[8][3] = {{"info", "debug", "loud"},  {"background", "frozen", "FULL"},
                                      {"sm90", "auto", "sm100"},  {"rows", "heads", "cols"},
                                      {"16", "0", "99999999999"}, {"1", "off", "yes"},
                                      {"4G", "512m", "16777216T"}, {"/opt/a::/b", "rel:/x", ":"}};
    for (int knob = 0; knob < 8; ++knob) {
      for (const char* v : values[knob]) c.add(static_cast<std::uint8_t>(knob), v);
    }
  }

  // fuzz_validate_attention: four tensors and the options.
  {
    Corpus c(out, "validate_attention");
    const std::uint64_t q = 0x10000000, k = 0x20000000, v = 0x30000000, o = 0x40000000;
    c.add(0, validation_input({contiguous(q, 2, 4, 128, 64), contiguous(k, 2, 4, 128, 64), contiguous(v, 2, 4, 128, 64),
                               contiguous(o, 2, 4, 128, 64)}));
    // Regressions (issue 17): 2^64 elements with a NULL pointer and all-zero
    // strides, odd strides and a misaligned pointer; an output stride near
    // INT64_MAX.
    const FuzzTensor huge{0, {32768, 32768, std::int64_t{1} << 28, 64}, {0, 0, 0, 0}};
    c.add(0, validation_input({huge, contiguous(k, 2, 4, 128, 64), contiguous(v, 2, 4, 128, 64), huge}));
    const FuzzTensor odd{q + 3, {32768, 32768, std::int64_t{1} << 28, 64}, {7, 5, 3, 1}};
    c.add(0, validation_input({odd, contiguous(k, 2, 4, 128, 64), contiguous(v, 2, 4, 128, 64), huge}));
    FuzzTensor far = contiguous(o, 2, 4, 128, 64);
    far.strides[0] = std::numeric_limits<std::int64_t>::max() - 7;
    c.add(0, validation_input({contiguous(q, 2, 4, 128, 64), contiguous(k, 2, 4, 128, 64), contiguous(v, 2, 4, 128, 64),
                               far}));
  }

  // fuzz_cache_scan: 3-byte operations (op, a, b) building a cache tree.
  {
    Corpus c(out, "cache_scan");
    c.add(7, std::string("\x07\x02\x00\x07\x03\x00\x04\x05\x05{\"k\":", 12));  // entries and a record
    c.add(6, std::string("\x06\x00\x00", 3));  // cubin/ is a link out of the cache
    c.add(6, std::string("\x06\x01\x00\x07\x02\x00", 6));  // tuning/ is a link out
    c.add(0, std::string("\x00\x01\x00\x02\x01\x02\x02\x01\x05\x03\x01\x00", 12));  // links and a FIFO
    c.add(5, std::string("\x05\xff\x00\x07\x09\x00\x05\x00\x01", 9));  // odd shard names, modes
  }

  // fuzz_warmup_manifest: bit 0 = a --shape string, else a manifest.
  {
    Corpus c(out, "warmup_manifest");
    c.add(0, nested());  // regression (issue 17): crashed cujit-warmup --manifest
    c.add(0, R"({"shapes": [)" + nested(1000, "{}") + "]}");
    c.add(0, R"({"shapes": [{"batch": 1, "heads": 16, "seq": 1024, "head_dim": 64, "dtype": "fp16", "causal": false}]})");
    c.add(0, R"({"shapes": [{"seq": 4096, "head_dim": 128}, {"batch": 4, "heads": 32, "seq": 512, "head_dim": 64, "dtype": "bf16", "causal": true}]})");
    c.add(0, R"({"shapes": []})");
    c.add(1, "1,16,1024,64,fp16,0");
    c.add(1, "4,16,4096,128,bf16,1");
    c.add(1, "2,8,77,64,bfloat16,0");
  }

  // fuzz_cache_archive: mode % 3 = 0 file as is, 1 checksum fix-up,
  // 2 decompressed stream.
  {
    Corpus c(out, "cache_archive");
    const std::string k1 = jit::cache::sha256_hex("one"), k2 = jit::cache::sha256_hex("two");
    const json tkey = fuzz::tune_key();
    const std::string thex = jit::cache::sha256_hex(tkey.dump());
    const std::vector<jit::cache::ArchiveFile> files = {
        {"cubin/" + k1.substr(0, 2) + "/" + k1 + ".cubin", CubinStore::encode(k1, payload("one", 100), cubin_meta("v1"))},
        {"cubin/" + k2.substr(0, 2) + "/" + k2 + ".cubin", CubinStore::encode(k2, payload("two", 40), cubin_meta("v2"))},
        {"tuning/" + thex + ".json", tuning_record_text(tkey)},
    };
    c.add(0, jit::cache::encode_archive(files));
    c.add(1, jit::cache::encode_archive({files[0]}));
    c.add(0, jit::cache::encode_archive({}));
    // Regression (issue 17): a tuning record whose key nests 200,000 levels
    // (a 309-byte archive made cujit-cache import exit 139).
    const std::string deep_key = nested();
    c.add(0, jit::cache::encode_archive(
                 {{"tuning/" + jit::cache::sha256_hex(deep_key) + ".json", R"({"key": )" + deep_key + "}"}}));
    for (const auto& subset : {files, std::vector<jit::cache::ArchiveFile>{files[2]}}) {
      json list = json::array();
      std::string body;
      for (const auto& f : subset) {
        list.push_back({{"path", f.relative}, {"size", f.bytes.size()}, {"sha256", jit::cache::sha256_hex(f.bytes)}});
        body += f.bytes;
      }
      const std::string manifest =
          json{{"format", "cujit-cache-archive"}, {"version", jit::cache::kArchiveFormatVersion}, {"files", list}}.dump();
      std::string stream;
      put_u64(stream, manifest.size());
      c.add(2, stream + manifest + body);
    }
  }
  std::printf("seeds written under %s\n", out.c_str());
  return 0;
}
