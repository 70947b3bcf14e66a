#include "jit/attention/view_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "jit/error.h"

namespace jit::detail {
namespace {

// Byte range [first, last) a view can touch (empty views touch nothing), or
// nullopt when it does not fit in the address space. Sizes and strides are
// non-negative here (check_view).
std::optional<std::pair<std::uintptr_t, std::uintptr_t>> checked_byte_extent(const TensorView& t) {
  if (is_empty(t)) return std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
  std::uint64_t last = 0;  // element offset of the last element
  for (int i = 0; i < 4; ++i) {
    std::uint64_t step = 0;
    if (__builtin_mul_overflow(std::uint64_t(t.shape[i] - 1), std::uint64_t(t.strides[i]), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return std::nullopt;
    }
  }
  std::uint64_t bytes = 0;
  std::uintptr_t end = 0;
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, element_size(t.dtype), &bytes) ||
      __builtin_add_overflow(base, bytes, &end)) {
    return std::nullopt;
  }
  return std::pair<std::uintptr_t, std::uintptr_t>{base, end};
}

}  // namespace

void invalid(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

std::string shape_text(const TensorView& t) {
  return fmt::format("[{}, {}, {}, {}]", t.shape[0], t.shape[1], t.shape[2], t.shape[3]);
}

std::string strides_text(const TensorView& t) {
  return fmt::format("[{}, {}, {}, {}]", t.strides[0], t.strides[1], t.strides[2], t.strides[3]);
}

bool is_empty(const TensorView& t) {
  return std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
}

std::pair<std::uintptr_t, std::uintptr_t> byte_extent(const TensorView& t) { return checked_byte_extent(t).value(); }

void check_view(const char* name, const TensorView& t) {
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] < 0) invalid(fmt::format("{} has a negative size in dimension {}: shape {}", name, i, shape_text(t)));
    if (t.strides[i] < 0) invalid(fmt::format("{} has a negative stride in dimension {}", name, i));
  }
  if (is_empty(t)) return;
  std::int64_t count = 0;
  if (__builtin_mul_overflow(t.shape[0], t.shape[1], &count) || __builtin_mul_overflow(count, t.shape[2], &count) ||
      __builtin_mul_overflow(count, t.shape[3], &count)) {
    invalid(fmt::format("{}'s shape {} has more elements than a 64-bit count holds", name, shape_text(t)));
  }
  if (!checked_byte_extent(t)) {
    invalid(fmt::format("{}'s shape {} and strides {} reach past the end of the address space from {}", name,
                        shape_text(t), strides_text(t), t.data));
  }
  if (t.data == nullptr) invalid(fmt::format("{} is a null pointer but has shape {}", name, shape_text(t)));
  if (t.strides[3] != 1) {
    invalid(fmt::format("{}'s last dimension must be contiguous (stride 1), got stride {}; make it contiguous "
                        "first (e.g. .contiguous())",
                        name, t.strides[3]));
  }
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) {
    invalid(fmt::format("{} must be 16-byte aligned for vector loads; its address is {}", name, t.data));
  }
  const std::int64_t chunk = 16 / std::int64_t(element_size(t.dtype));  // elements per 16 bytes
  for (int i = 0; i < 3; ++i) {
    if (t.shape[i] > 1 && t.strides[i] % chunk != 0) {
      invalid(fmt::format("{}'s stride {} in dimension {} is not a multiple of {} elements (16 bytes of {}), which "
                          "the kernels' 16-byte loads need",
                          name, t.strides[i], i, chunk, to_string(t.dtype)));
    }
  }
}

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto [a0, a1] = byte_extent(a);
  const auto [b0, b1] = byte_extent(b);
  return a0 < b1 && b0 < a1;
}

// Sorted by stride, each dimension must step past all of the ones inside it.
bool overlaps_itself(const TensorView& t) {
  if (is_empty(t)) return false;
  std::array<int, 4> dims{0, 1, 2, 3};
  std::sort(dims.begin(), dims.end(), [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  std::int64_t span = 1;  // elements covered by the dimensions inside
  for (int d : dims) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] < span) return true;
    // Past int64: no stride can step over it, so a further dimension overlaps.
    if (__builtin_mul_overflow(t.strides[d], t.shape[d], &span)) span = std::numeric_limits<std::int64_t>::max();
  }
  return false;
}

}  // namespace jit::detail
