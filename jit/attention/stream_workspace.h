// Device workspace that the library supplies when the caller gives none: one
// buffer per stream, reused by every call on it (calls on one stream run in
// order, so they never use it at the same time).
#pragma once
#include <cstddef>

#include "jit/kernel_family.h"

namespace jit::detail {

// At least `bytes` of device memory for work enqueued on `stream` in the
// current context. Growing it waits for the stream's earlier work (which
// may still use the old buffer), so it is refused while the stream is being
// captured: Error(InvalidArgument) saying to run once outside the capture or
// pass a workspace.
void* stream_workspace(Stream stream, std::size_t bytes);

}  // namespace jit::detail
