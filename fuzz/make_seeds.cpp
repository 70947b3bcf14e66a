// Writes the seed corpora of the fuzz targets: valid inputs made with the
// library's own encoders (so checksums and keys are right for this version),
// plus a few near misses. Usage: cujit_fuzz_seeds OUTDIR; writes
// OUTDIR/<target>/seed-<n> for each target (mode byte first, see each target).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/archive.h"
#include "cache/cubin_store.h"
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

std::string payload(const std::string& name, int n) {
  std::string p = "\x7f" "ELF cubin of " + name;
  for (int i = 0; i < n; ++i) p += static_cast<char>((i * 31 + 7) & 0xFF);
  return p;
}

json cubin_meta(const std::string& variant) {
  return {{"variant", variant}, {"arch", "sm_90a"}, {"family", "attention"}, {"lowered_name", "_Z8attn_fwdILi64EEvv"},
          {"registers", 128}, {"spill_bytes", 0}, {"shared_bytes", 49152}};
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
  }

  // fuzz_warmup_manifest: bit 0 = a --shape string, else a manifest.
  {
    Corpus c(out, "warmup_manifest");
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
