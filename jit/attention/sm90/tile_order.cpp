#include "jit/attention/sm90/tile_order.h"

#include <algorithm>
#include <vector>

#include "jit/knobs.h"
#include "kernel_src/attention/common/key_blocks.h"

namespace jit::detail {
namespace {

// Past this many tiles the choice is not simulated: so many rounds per CTA
// leave heads_first's drift, if any, a small share of the work, and plan()
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

std::int64_t busiest_cta_work(const TileGrid& g, TileOrder order) {
  const std::int64_t m_blocks = (g.seq_q + g.block_m - 1) / g.block_m;
  const std::int64_t tiles = m_blocks * g.heads;
  if (tiles == 0 || g.ctas <= 0) return 0;
  std::vector<std::int64_t> work(std::size_t(g.ctas), 0);
  for (std::int64_t index = 0; index < tiles; ++index) {
    // The kernel's tile_index() inverted: round r deals forward when even.
    const std::int64_t round = index / g.ctas, slot = index % g.ctas;
    const std::int64_t cta = round % 2 == 0 ? slot : g.ctas - 1 - slot;
    const std::int64_t m = order == TileOrder::heads_first ? index % m_blocks : index / g.heads;
    const std::int64_t m_block = g.causal ? m_blocks - 1 - m : m;
    work[std::size_t(cta)] += tile_work(g, m_block * g.block_m);
  }
  return *std::max_element(work.begin(), work.end());
}

TileOrder choose_tile_order(const TileGrid& g) {
  // Without a mask every tile has the same length: any order is even.
  if (!g.causal) return TileOrder::heads_first;
  const std::int64_t tiles = (g.seq_q + g.block_m - 1) / g.block_m * g.heads;
  if (tiles > kMaxSimulatedTiles) return TileOrder::heads_first;
  const std::int64_t by_heads = busiest_cta_work(g, TileOrder::heads_first);
  const std::int64_t by_rows = busiest_cta_work(g, TileOrder::rows_first);
  return by_heads * 8 > by_rows * 9 ? TileOrder::rows_first : TileOrder::heads_first;
}

TileOrder tile_order(const AttnProblem& problem, int block_m, int block_n, int ctas) {
  switch (knobs().tile_order) {
    case TileOrderChoice::heads_first: return TileOrder::heads_first;
    case TileOrderChoice::rows_first: return TileOrder::rows_first;
    case TileOrderChoice::automatic: break;
  }
  return choose_tile_order({problem.seq_q, problem.seq_k, problem.batch * problem.heads_q, problem.causal_offset,
                            problem.causal, block_m, block_n, ctas});
}

}  // namespace jit::detail
