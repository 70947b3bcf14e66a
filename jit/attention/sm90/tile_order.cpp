#include "jit/attention/sm90/tile_order.h"

#include <algorithm>
#include <vector>

#include "jit/knobs.h"
#include "kernel_src/attention/common/key_blocks.h"

namespace jit::detail {
namespace {

// Past this many tiles the choice is not simulated: so many rounds per CTA
// leave heads first's drift, if any, a small share of the work, and plan()
// must stay cheap.
constexpr std::int64_t kMaxSimulatedTiles = std::int64_t{1} << 18;

// K/V blocks of the tile whose rows start at m0, as the kernel counts them,
// plus one for the tile itself. Sequence lengths fit an int (the kernel's
// TMA coordinates are 32-bit).
std::int64_t tile_work(const TileGrid& g, std::int64_t m0) {
  return cujit::key_block_range(int(m0), g.block_m, g.block_n, int(g.seq_q), int(g.seq_k), g.causal, g.causal_offset)
             .count +
         1;
}

}  // namespace

std::int64_t busiest_cta_work(const TileGrid& g, std::int64_t group_heads) {
  const std::int64_t m_blocks = (g.seq_q + g.block_m - 1) / g.block_m;
  const std::int64_t tiles = m_blocks * g.heads;
  if (tiles == 0 || g.ctas <= 0) return 0;
  group_heads = std::clamp<std::int64_t>(group_heads, 1, g.heads);
  std::vector<std::int64_t> work(std::size_t(g.ctas), 0);
  for (std::int64_t index = 0; index < tiles; ++index) {
    // The kernel's tile_index() inverted: round r deals forward when even.
    const std::int64_t round = index / g.ctas, slot = index % g.ctas;
    const std::int64_t cta = round % 2 == 0 ? slot : g.ctas - 1 - slot;
    // The kernel's dense_tile_at(): the group, then rows first within it.
    const std::int64_t group = index / (group_heads * m_blocks), within = index % (group_heads * m_blocks);
    const std::int64_t heads_here = std::min(group_heads, g.heads - group * group_heads);
    const std::int64_t m = within / heads_here;
    const std::int64_t m_block = g.causal ? m_blocks - 1 - m : m;
    work[std::size_t(cta)] += tile_work(g, m_block * g.block_m);
  }
  return *std::max_element(work.begin(), work.end());
}

std::int64_t heads_fitting_l2(const TileGrid& g) {
  if (g.kv_bytes_per_head <= 0) return std::max<std::int64_t>(g.heads, 1);
  return std::clamp<std::int64_t>(kTileGroupL2Bytes / g.kv_bytes_per_head, 1, std::max<std::int64_t>(g.heads, 1));
}

std::int64_t choose_group_heads(const TileGrid& g) {
  if (!g.causal) return 1;
  const std::int64_t tiles = (g.seq_q + g.block_m - 1) / g.block_m * g.heads;
  if (tiles > kMaxSimulatedTiles) return 1;
  const std::int64_t fitting = heads_fitting_l2(g);
  const std::int64_t by_heads = busiest_cta_work(g, 1);
  const std::int64_t by_fitting = busiest_cta_work(g, fitting);
  const std::int64_t by_rows = busiest_cta_work(g, g.heads);
  const std::int64_t local = by_fitting < by_heads ? fitting : 1;
  const std::int64_t local_work = std::min(by_fitting, by_heads);
  return local_work * 8 > by_rows * 9 ? std::max<std::int64_t>(g.heads, 1) : local;
}

std::int64_t tile_group_heads(const AttnProblem& problem, int block_m, int block_n, int ctas) {
  const std::int64_t heads = problem.batch * problem.heads_q;
  if (const std::int64_t forced = knobs().tile_group_heads) {
    return std::clamp<std::int64_t>(forced, 1, std::max<std::int64_t>(heads, 1));
  }
  // Query heads share their KV head's K/V.
  const std::int64_t kv_bytes_per_head =
      problem.seq_k * problem.kv_bytes_per_key() / std::max<std::int64_t>(problem.heads_q, 1);
  return choose_group_heads({problem.seq_q, problem.seq_k, heads, problem.causal_offset, problem.causal, block_m,
                             block_n, ctas, kv_bytes_per_head});
}

}  // namespace jit::detail
