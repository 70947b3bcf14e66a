// Checks of one tensor view, shared by every argument validation of the
// attention layer (jit::attention's and the KV-cache path's): what the
// kernels' 16-byte loads need, sizes that fit, and memory that two views or
// one view's own elements share.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "jit/tensor.h"

namespace jit::detail {

// Throws Error(InvalidArgument) with `message` (which names the argument).
[[noreturn]] void invalid(const std::string& message);

// "[B, H, S, D]" and the strides likewise, for messages.
std::string shape_text(const TensorView& t);
std::string strides_text(const TensorView& t);

bool is_empty(const TensorView& t);

// Throws Error(InvalidArgument) naming `name` unless the view has
// non-negative sizes and strides, an element count and byte extent that fit,
// a non-null, 16-byte-aligned pointer, a contiguous last dimension and other
// strides that are multiples of 16 bytes. An empty view passes once its
// sizes and strides are non-negative.
void check_view(const char* name, const TensorView& t);

// Byte range [first, last) a view that passed check_view can touch (empty
// views touch nothing).
std::pair<std::uintptr_t, std::uintptr_t> byte_extent(const TensorView& t);

// True when the byte ranges of two checked views intersect.
bool overlaps(const TensorView& a, const TensorView& b);

// True when two elements of a checked view share an address (a stride of 0,
// or rows closer than their length), so that writes through it would race.
bool overlaps_itself(const TensorView& t);

}  // namespace jit::detail
