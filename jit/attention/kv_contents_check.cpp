#include "jit/attention/kv_contents_check.h"

#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "jit/attention/first_bad_index.h"
#include "jit/attention/kv_validation.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/fixed_kernel_family.h"
#include "jit/log.h"
#include "kernel_src/attention/decode/decode_params.h"

namespace jit::detail {
namespace {

const KernelFamily& check_family() {
  static const FixedKernelFamily family(
      "check_kv", "attention/decode/check_kv.cu", [](const Json&) { return std::string("check_kv"); },
      [](const Json&) { return std::string("cujit::decode::check_kv"); });
  return family;
}


}  // namespace

void check_kv_contents(const AttnProblem& problem, const KvCache& cache, Stream stream) {
  if (!can_check_on(stream, "the KV cache's contents")) return;
  const bool paged = problem.page_size > 0;
  const std::int64_t pages_per_seq = paged ? cache.pages_per_seq : 0;
  const std::int64_t table_stride = table_stride_of(cache);
  const std::int64_t slots = problem.batch * (pages_per_seq + 1);
  if (slots >= INT_MAX) {
    log_info("CUJIT_CHECK: {} table entries are too many to check", slots);
    return;
  }
  const FirstBadIndex first_bad;
  cujit::CheckKvParams p{};
  p.seq_lens = problem.seq_lens ? cache.seq_lens : nullptr;
  p.block_table = paged ? cache.block_table : nullptr;
  p.table_stride = table_stride;
  p.batch = int(problem.batch);
  p.pages_per_seq = int(pages_per_seq);
  p.page_size = std::max(problem.page_size, 1);
  p.max_seq_k = int(problem.seq_k);
  p.num_pages = paged ? kernel_page_count(cache.k) : 0;
  p.first_bad = first_bad.device();
  LaunchGeometry g;
  g.block = {256, 1, 1};
  g.grid = {unsigned((slots + 255) / 256), 1, 1};
  get_kernel(check_family(), Json::object(), Json::object()).launch(g, p, stream);
  const std::optional<std::int32_t> bad = first_bad.after(stream);
  if (!bad) return;
  const std::int64_t b = *bad / (pages_per_seq + 1), slot = *bad % (pages_per_seq + 1);
  if (slot == pages_per_seq) {
    const std::int32_t len = read_device_int32(cache.seq_lens + b);
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("CUJIT_CHECK: cache.seq_lens[{}] = {} is not a length from 0 to max_seq_k ({})", b, len,
                            problem.seq_k));
  }
  const std::int32_t page = read_device_int32(cache.block_table + b * table_stride + slot);
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("CUJIT_CHECK: cache.block_table[{}][{}] = {} is not a page of the pool (0 to {}), and "
                          "sequence {} reads it",
                          b, slot, page, cache.k.shape[0] - 1, b));
}

}  // namespace jit::detail
