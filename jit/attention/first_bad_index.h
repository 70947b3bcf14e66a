// What CUJIT_CHECK's device checks share (kv_contents_check.cpp, the ragged
// prepare step's check): a device int32 that a check kernel lowers to the
// first bad index with atomicMin, read back once the stream is done; and
// single int32 reads of the entries the report quotes.
#pragma once
#include <cstdint>
#include <optional>

#include "jit/kernel_family.h"
#include "jit/tensor.h"

namespace jit::detail {

class FirstBadIndex {
 public:
  FirstBadIndex();  // holds INT32_MAX: nothing found
  int* device() const { return static_cast<int*>(buffer_.data()); }
  // Synchronizes `stream`; the lowest index the check reported, if any.
  std::optional<std::int32_t> after(Stream stream) const;

 private:
  DeviceBuffer buffer_;
};

// False, with a line in the log naming `what`, while `stream` is being
// captured into a graph (a check synchronizes, which a capture cannot).
bool can_check_on(Stream stream, const char* what);

// One int32 of device memory, read synchronously.
std::int32_t read_device_int32(const std::int32_t* device_address);

}  // namespace jit::detail
