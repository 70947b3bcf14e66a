// Shared by the libFuzzer targets: the first input byte picks a mode, a
// scratch directory per process, and a checksum fix-up so that mutated
// inputs get past the SHA-256 trailers to the parsers behind them.
#pragma once
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cache/sha256.h"

namespace fuzz {

// The fixed keys of fuzz_cubin_decode and fuzz_tuning_db (make_seeds.cpp
// writes valid entries for them).
inline const std::string kCubinKey = "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc";
inline const nlohmann::json& tune_key() {
  static const nlohmann::json key = {{"family", "attention"}, {"arch", "sm_90a"}, {"device", "NVIDIA H100"},
                                     {"spec", {{"dtype", "f16"}, {"head_dim", 64}, {"causal", false}}},
                                     {"sq", 1024}, {"sk", 1024}, {"bh", 32}};
  return key;
}

// A fuzz input: mode byte + the rest.
struct Input {
  std::uint8_t mode = 0;
  std::string rest;
};

inline Input split(const std::uint8_t* data, std::size_t size) {
  Input in;
  if (size == 0) return in;
  in.mode = data[0];
  in.rest.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  return in;
}

// Replaces the last 32 bytes of `bytes` by the SHA-256 of everything before
// them (inputs shorter than that get a digest appended instead).
inline std::string with_trailing_sha256(std::string bytes) {
  if (bytes.size() < 32) {
    const jit::cache::Digest d = jit::cache::sha256(bytes);
    return bytes.append(reinterpret_cast<const char*>(d.data()), d.size());
  }
  const std::size_t body = bytes.size() - 32;
  const jit::cache::Digest d = jit::cache::sha256(std::string_view(bytes).substr(0, body));
  bytes.replace(body, 32, reinterpret_cast<const char*>(d.data()), d.size());
  return bytes;
}

// A private temporary directory, removed at exit: under $TMPDIR when set,
// else /dev/shm when there is one (the targets that go through files write
// one per execution), else /tmp.
inline const std::filesystem::path& scratch_dir() {
  // Never destroyed: the exit handler below still needs it.
  static const std::filesystem::path* const dir = [] {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string base = tmpdir && *tmpdir ? tmpdir : std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/cujit-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    return new std::filesystem::path(tmpl);
  }();
  static const bool cleanup_registered = [] {
    return std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    }) == 0;
  }();
  (void)cleanup_registered;
  return *dir;
}

// Plain write (no fsync: the readers under test do not care how it got there).
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// A harness-detected violation of a documented property: abort so that
// libFuzzer saves the input.
[[noreturn]] inline void violated(const char* what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace fuzz
