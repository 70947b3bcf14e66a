// A block table whose pages are a random permutation of the whole pool:
// sequence b's pages sit anywhere, in any order, as in a serving engine's
// pool after many allocations and frees.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "jit/error.h"

namespace serving_bench {

/// Row-major [batch, pages_per_seq] page ids: every id in [0, batch *
/// pages_per_seq) exactly once, shuffled with `seed`.
inline std::vector<std::int32_t> shuffled_block_table(std::int64_t batch, std::int64_t pages_per_seq,
                                                      std::uint64_t seed) {
  if (batch < 0 || pages_per_seq < 0 ||
      (pages_per_seq > 0 && batch > std::numeric_limits<std::int32_t>::max() / pages_per_seq))
    throw jit::Error(jit::ErrorCode::InvalidArgument, "block table: batch * pages_per_seq must fit in int32");
  std::vector<std::int32_t> table(std::size_t(batch * pages_per_seq));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(seed));
  return table;
}

}  // namespace serving_bench
