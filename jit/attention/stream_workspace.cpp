#include "jit/attention/stream_workspace.h"

#include <cuda.h>

#include <map>
#include <mutex>
#include <utility>

#include "jit/driver.h"
#include "jit/error.h"
#include "jit/tensor.h"

namespace jit::detail {

void* stream_workspace(Stream stream, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // Keyed by the stream's id, not its handle: a handle can be reused by a new
  // stream while the destroyed one's work still runs.
  CUcontext context = nullptr;
  CUJIT_CU_CHECK(driver().cuCtxGetCurrent(&context));
  unsigned long long id = 0;
  CUJIT_CU_CHECK(driver().cuStreamGetId(reinterpret_cast<CUstream>(stream), &id));
  static std::mutex mutex;
  static std::map<std::pair<CUcontext, unsigned long long>, DeviceBuffer> buffers;
  std::lock_guard lock(mutex);
  DeviceBuffer& buffer = buffers[{context, id}];
  if (buffer.size() < bytes) {
    if (stream_is_capturing(stream)) {
      throw Error(ErrorCode::InvalidArgument,
                  "this call needs a larger workspace than the stream has, and the stream is being captured into a "
                  "graph, where it cannot be allocated: make the same call once before the capture, or use a plan "
                  "(jit::plan_kv_attention) with a workspace of your own");
    }
    CUJIT_CU_CHECK(driver().cuStreamSynchronize(reinterpret_cast<CUstream>(stream)));
    buffer = DeviceBuffer(bytes);
  }
  return buffer.data();
}

}  // namespace jit::detail
