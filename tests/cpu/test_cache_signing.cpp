// Tests for cache archives' authenticity and limits (issue 17, findings 2
// and 4): Ed25519 signatures checked against trusted keys, existing entries
// kept unless --replace, and caps on the manifest and the files' total.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cache/archive.h"
#include "cache/archive_signature.h"
#include "cache/cache_error.h"
#include "cache/cubin_store.h"
#include "cache/sha256.h"
#include "cache/tuning_db.h"
#include "tests/support/fake_cubin.h"
#include "tests/support/file_bytes.h"

namespace fs = std::filesystem;
using namespace jit::cache;
using nlohmann::json;

namespace {

using cujit_test::slurp;
using cujit_test::spit;

// A fresh Ed25519 key pair as PEM files: `<name>.pem` and `<name>.pub.pem`.
void make_key_pair(const fs::path& dir, const std::string& name) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                                  &EVP_PKEY_CTX_free);
  EVP_PKEY* raw = nullptr;
  ASSERT_TRUE(ctx && EVP_PKEY_keygen_init(ctx.get()) == 1 && EVP_PKEY_keygen(ctx.get(), &raw) == 1);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(raw, &EVP_PKEY_free);
  FILE* priv = std::fopen((dir / (name + ".pem")).c_str(), "w");
  FILE* pub = std::fopen((dir / (name + ".pub.pem")).c_str(), "w");
  ASSERT_TRUE(priv && pub);
  EXPECT_EQ(PEM_write_PrivateKey(priv, key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  EXPECT_EQ(PEM_write_PUBKEY(pub, key.get()), 1);
  std::fclose(priv);
  std::fclose(pub);
}

std::string cubin_path(const std::string& key) { return "cubin/" + key.substr(0, 2) + "/" + key + ".cubin"; }

class ArchiveTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cujit_archive_trust_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    a_ = tmp_ / "a";
    b_ = tmp_ / "b";
    archive_ = tmp_ / "cache.cujit";
    make_key_pair(tmp_, "build");
    make_key_pair(tmp_, "other");
    for (int i = 0; i < 3; ++i) {
      const std::string key = sha256_hex("entry" + std::to_string(i));
      CubinStore(a_).store(key, jit::test::fake_cubin("sm_90a", "body" + std::to_string(i)), {{"arch", "sm_90a"}});
    }
    TuningDb(a_).store({{"k", 1}}, {{"winner", 1}});
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  fs::path key_file(const std::string& name) const { return tmp_ / (name + ".pem"); }
  fs::path pub_file(const std::string& name) const { return tmp_ / (name + ".pub.pem"); }

  // Import must fail naming `expect` and write nothing.
  void expect_refused(const ImportOptions& options, const std::string& expect) {
    try {
      import_archive(archive_, b_, options);
      ADD_FAILURE() << "accepted; expected: " << expect;
    } catch (const CacheError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(b_)) << expect;
  }

  fs::path tmp_, a_, b_, archive_;
};

}  // namespace

TEST_F(ArchiveTrust, SignedArchiveImportsWithItsKey) {
  const ExportReport ex = export_archive(a_, archive_, {key_file("build")});
  EXPECT_TRUE(ex.is_signed);
  ImportOptions options;
  options.trusted_keys = {pub_file("other"), pub_file("build")};
  const ImportReport r = import_archive(archive_, b_, options);
  EXPECT_TRUE(r.is_signed);
  EXPECT_TRUE(r.signature_verified);
  EXPECT_EQ(r.written, 4u);
}

TEST_F(ArchiveTrust, SignedArchiveImportsWithoutTrustedKeys) {
  export_archive(a_, archive_, {key_file("build")});
  const ImportReport r = import_archive(archive_, b_);
  EXPECT_TRUE(r.is_signed);
  EXPECT_FALSE(r.signature_verified);
  EXPECT_EQ(r.written, 4u);
}

TEST_F(ArchiveTrust, UnsignedOrForeignSignedArchiveIsRefusedWhenKeysAreTrusted) {
  ImportOptions options;
  options.trusted_keys = {pub_file("build")};
  export_archive(a_, archive_);
  expect_refused(options, "is not signed");
  export_archive(a_, archive_, {key_file("other")});
  expect_refused(options, "not by any trusted key");
}

TEST_F(ArchiveTrust, EverySignatureByteMatters) {
  export_archive(a_, archive_, {key_file("build")});
  const std::string good = slurp(archive_);
  ImportOptions options;
  options.trusted_keys = {pub_file("build")};
  // The signature sits before the final checksum: flipped as is, the checksum
  // catches it; flipped and resealed, the signature check does.
  const std::size_t sig_begin = good.size() - 32 - 64;
  for (std::size_t i = sig_begin; i < good.size() - 32; i += 7) {
    std::string bad = good;
    bad[i] ^= 0x01;
    spit(archive_, bad);
    expect_refused(options, "checksum");
    bad.resize(bad.size() - 32);
    const Digest d = sha256(bad);
    bad.append(reinterpret_cast<const char*>(d.data()), d.size());
    spit(archive_, bad);
    expect_refused(options, "not by any trusted key");
  }
  // So does a stream byte, resealed: the digest the signature covers changes.
  std::string bad = good;
  bad[20] ^= 0x40;
  bad.resize(bad.size() - 32);
  const Digest d = sha256(bad);
  bad.append(reinterpret_cast<const char*>(d.data()), d.size());
  spit(archive_, bad);
  expect_refused(options, "not by any trusted key");
  // A signature kind other than none or Ed25519 is corrupt.
  bad = good;
  bad[sig_begin - 1] = 7;
  bad.resize(bad.size() - 32);
  const Digest d2 = sha256(bad);
  bad.append(reinterpret_cast<const char*>(d2.data()), d2.size());
  spit(archive_, bad);
  expect_refused({}, "signature kind 7");
}

TEST_F(ArchiveTrust, KeysThatAreNotEd25519PemAreErrors) {
  spit(tmp_ / "junk.pem", "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n");
  EXPECT_THROW(export_archive(a_, archive_, {tmp_ / "junk.pem"}), CacheError);
  EXPECT_THROW(export_archive(a_, archive_, {pub_file("build")}), CacheError);  // a public key cannot sign
  EXPECT_FALSE(fs::exists(archive_));
  export_archive(a_, archive_, {key_file("build")});
  ImportOptions options;
  options.trusted_keys = {tmp_ / "junk.pem"};
  expect_refused(options, "is not an Ed25519 public key");
  options.trusted_keys = {tmp_ / "missing.pem"};
  expect_refused(options, "cannot read");
}

TEST(ArchiveKeyList, Splits) {
  EXPECT_EQ(split_key_list("a.pem:/k/b.pem::"), (std::vector<fs::path>{"a.pem", "/k/b.pem"}));
  EXPECT_TRUE(split_key_list("").empty());
}

// ---------------------------------------------------------------- replace

TEST_F(ArchiveTrust, ImportKeepsDifferingValidEntriesUnlessReplace) {
  export_archive(a_, archive_);
  // b already holds a valid, different entry under one of the archive's keys.
  const std::string key = sha256_hex("entry1");
  const std::string mine = jit::test::fake_cubin("sm_90a", "b's own build");
  CubinStore(b_).store(key, mine, {{"arch", "sm_90a"}});
  const ImportReport kept = import_archive(archive_, b_);
  EXPECT_EQ(kept.conflicts, std::vector<std::string>{cubin_path(key)});
  EXPECT_EQ(kept.written, 3u);
  EXPECT_EQ(CubinStore(b_).load(key)->payload, mine);
  // Again: the other entries are unchanged now, the conflict is reported again.
  const ImportReport again = import_archive(archive_, b_);
  EXPECT_EQ(again.unchanged, 3u);
  EXPECT_EQ(again.conflicts.size(), 1u);
  // With replace, the archive's entry wins.
  ImportOptions replace;
  replace.replace = true;
  const ImportReport replaced = import_archive(archive_, b_, replace);
  EXPECT_TRUE(replaced.conflicts.empty());
  EXPECT_EQ(replaced.written, 1u);
  EXPECT_EQ(CubinStore(b_).load(key)->payload, CubinStore(a_).load(key)->payload);
}

TEST_F(ArchiveTrust, ImportRepairsAnInvalidExistingEntry) {
  export_archive(a_, archive_);
  const std::string key = sha256_hex("entry2");
  CubinStore(b_).store(key, jit::test::fake_cubin("sm_90a"), {{"arch", "sm_90a"}});
  spit(CubinStore(b_).entry_path(key), "corrupt");
  const ImportReport r = import_archive(archive_, b_);
  EXPECT_TRUE(r.conflicts.empty());
  EXPECT_EQ(r.written, 4u);
}

// ---------------------------------------------------------------- finding 4: limits

TEST_F(ArchiveTrust, DecompressionBombIsRefusedBeforeWriting) {
  // Two 33 MiB cubins of zeros: a few KiB compressed, 66 MiB expanded (observed
  // before: a 67 KB archive wrote 2.0 GiB).
  std::vector<ArchiveFile> files;
  for (int i = 0; i < 2; ++i) {
    const std::string key = sha256_hex("bomb" + std::to_string(i));
    files.push_back({cubin_path(key), CubinStore::encode(key, jit::test::fake_cubin("sm_90a", std::string(33 << 20, '\0')),
                                                         {{"arch", "sm_90a"}})});
  }
  spit(archive_, encode_archive(files));
  ASSERT_LT(fs::file_size(archive_), 64u << 10);
  expect_refused({}, "decompression bomb");
}

TEST_F(ArchiveTrust, TotalOverTheCacheBoundIsRefusedBeforeWriting) {
  export_archive(a_, archive_);
  ImportOptions options;
  options.max_total_bytes = 500;  // the archive's files add up to more
  expect_refused(options, "CUJIT_CACHE_MAX_BYTES");
  options.max_total_bytes = 1 << 20;
  EXPECT_EQ(import_archive(archive_, b_, options).written, 4u);
}

TEST_F(ArchiveTrust, OversizedManifestIsRefusedUnparsed) {
  // 30,000 empty tuning records: a manifest over the 4 MiB cap.
  std::vector<ArchiveFile> files;
  for (int i = 0; i < 30000; ++i) files.push_back({"tuning/" + sha256_hex(std::to_string(i)) + ".json", ""});
  spit(archive_, encode_archive(files));
  expect_refused({}, "its manifest claims");
}

TEST_F(ArchiveTrust, OversizedFileIsRefused) {
  const std::string key = sha256_hex("huge");
  spit(archive_, encode_archive({{"tuning/" + key + ".json", std::string(kMaxTuningRecordBytes + 1, ' ')}}));
  expect_refused({}, "claims");
}
