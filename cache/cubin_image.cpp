#include "cache/cubin_image.h"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace jit::cache {

namespace {

// ELF64 header fields (System V gABI) and NVIDIA's machine number.
constexpr std::size_t kEhdrSize = 64;
constexpr unsigned kElfClass64 = 2, kElfDataLsb = 1, kEvCurrent = 1;
constexpr unsigned kEmCuda = 190;
constexpr std::size_t kShdrSize = 64, kPhdrSize = 56;

// Where the SM lives in e_flags, by EI_ABIVERSION. Read from NVRTC 13.0's
// cubins (a one-line kernel for each target): ABI 8 puts the SM in bits 8-15
// (sm_80 0x06005004, sm_89 0x06005904, sm_90 and sm_90a both 0x06005a04,
// sm_100/sm_100a/sm_100f 0x06006402, sm_120 0x06007802); the older ABI 7
// (CUDA 12 and before) put it in bits 0-7. The arch-specific suffix ("a",
// "f") is not in the header (NVRTC records it in .nv.compat), so the header
// tells sm_90 from sm_89 but not sm_90a from sm_90; the entry's key, which
// hashes the exact target, covers that.
constexpr unsigned kCudaAbiV1 = 7, kCudaAbiV2 = 8;

std::uint64_t le(std::string_view b, std::size_t pos, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b[pos + i])) << (8 * i);
  return v;
}

// A table of `count` entries of `entry` bytes at `offset` lies inside `size`.
bool table_inside(std::uint64_t offset, std::uint64_t count, std::uint64_t entry, std::uint64_t size) {
  if (count == 0) return true;
  if (offset > size) return false;
  return count <= (size - offset) / entry;
}

// The SM number, or why there is none.
std::string read_sm(std::string_view b, unsigned& sm) {
  if (b.size() < kEhdrSize || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) return "not an ELF image";
  if (static_cast<unsigned char>(b[4]) != kElfClass64 || static_cast<unsigned char>(b[5]) != kElfDataLsb ||
      static_cast<unsigned char>(b[6]) != kEvCurrent) {
    return "not a 64-bit little-endian ELF image";
  }
  const auto machine = le(b, 18, 2);
  if (machine != kEmCuda) return fmt::format("an ELF image for machine {}, not CUDA ({})", machine, kEmCuda);
  if (le(b, 20, 4) != kEvCurrent || le(b, 52, 2) != kEhdrSize) return "a CUDA ELF image with a malformed header";
  const std::uint64_t size = b.size();
  const auto phnum = le(b, 56, 2), shnum = le(b, 60, 2);
  if ((phnum != 0 && le(b, 54, 2) != kPhdrSize) || (shnum != 0 && le(b, 58, 2) != kShdrSize) ||
      !table_inside(le(b, 32, 8), phnum, kPhdrSize, size) || !table_inside(le(b, 40, 8), shnum, kShdrSize, size)) {
    return "a CUDA ELF image whose header tables lie outside it";
  }
  const unsigned abi = static_cast<unsigned char>(b[8]);
  const auto flags = static_cast<std::uint32_t>(le(b, 48, 4));
  if (abi == kCudaAbiV2) {
    sm = (flags >> 8) & 0xFF;
  } else if (abi == kCudaAbiV1) {
    sm = flags & 0xFF;
  } else {
    return fmt::format("a CUDA ELF image of unknown ABI version {}", abi);
  }
  return {};
}

}  // namespace

std::optional<unsigned> sm_number(std::string_view arch) {
  if (!arch.starts_with("sm_")) return std::nullopt;
  std::string_view digits = arch.substr(3);
  if (digits.ends_with('a') || digits.ends_with('f')) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  unsigned n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n;
}

std::optional<unsigned> cubin_sm(std::string_view image) {
  unsigned sm = 0;
  if (!read_sm(image, sm).empty()) return std::nullopt;
  return sm;
}

std::string cubin_image_problem(std::string_view image, std::string_view arch) {
  unsigned sm = 0;
  if (std::string why = read_sm(image, sm); !why.empty()) return "its payload is " + why;
  const std::optional<unsigned> want = sm_number(arch);
  if (!want) return fmt::format("its metadata names no valid arch ('{}')", arch.substr(0, 40));
  if (sm != *want) return fmt::format("its payload is a cubin for sm_{}, but its metadata says {}", sm, arch);
  return {};
}

}  // namespace jit::cache
