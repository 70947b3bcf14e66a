// The first step of a ragged batch: one CTA reads cu_seqlens and writes the
// batch's (sequence, m-block) tiles for the attention kernel that follows
// (its persistent CTAs, or its grid, take them in this order, each tile for
// every head, heads fastest).
//
// The order, a function of cu_seqlens alone, puts the most work first, so
// that it does not run alone at the end, and keeps tiles of equal work in
// sequence order, so that the CTAs at work at one time share K/V in L2:
//  - without a causal mask every tile of a sequence has the same work:
//    sequences by work (m-blocks times key blocks), largest first, each
//    sequence's tiles together;
//  - causal: sequences by m-blocks, most first, in groups whose keys
//    (group_key_rows in all) keep their K/V in L2; within a group by level,
//    level l being each sequence's l-th tile from its end (level 0 is its
//    last m-block, the one that sees the most keys): level 0 of every
//    sequence of the group, then level 1, ... Equal sequences then run one
//    m-block of a group's at a time, as the dense kernel's groups do
//    (jit/attention/sm90/tile_order.h): rounds of tiles of equal work, over
//    K/V that the levels after find in L2.
// Sequences are sorted by a bitonic sort, ties by index: up to 32 of them in
// one warp's registers, up to kSortedMax in shared memory; a larger batch
// keeps index order, sequence by sequence. Up to 32, the causal order's
// prefix sums are one warp's too: a barrier of the whole CTA costs about 370
// cycles on the H100, and the shared-memory sort and scans of 16 sequences
// took 6,000 cycles.
//
// Sequences are clamped to the packed tensors (rows [0, total)) and to the
// maxima, so a wrong cu_seqlens never sends a load or store outside them;
// with first_bad set (CUJIT_CHECK) the first sequence whose entries are
// wrong is reported as well.
#include "attention/varlen/varlen_params.h"
#include "common/ptx.cuh"

namespace cujit::varlen {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kSortedMax = 2048;  // sequences sorted; a larger batch keeps index order

struct Sequence {
  int q_row, k_row, seq_q, seq_k;
  bool bad;  // cu_seqlens entries out of order, out of the tensors or past a maximum
};

__device__ __forceinline__ Sequence sequence(const VarlenPrepareParams& p, int b) {
  const int q0 = p.cu_seqlens_q[b], q1 = p.cu_seqlens_q[b + 1];
  const int k0 = p.cu_seqlens_k[b], k1 = p.cu_seqlens_k[b + 1];
  Sequence s;
  s.bad = (b == 0 && (q0 != 0 || k0 != 0)) || q1 < q0 || k1 < k0 || q1 > p.total_q || k1 > p.total_k ||
          q1 - q0 > p.max_seq_q || k1 - k0 > p.max_seq_k;
  s.q_row = min(max(q0, 0), p.total_q);
  s.k_row = min(max(k0, 0), p.total_k);
  s.seq_q = min(max(min(q1, p.total_q) - s.q_row, 0), p.max_seq_q);
  s.seq_k = min(max(min(k1, p.total_k) - s.k_row, 0), p.max_seq_k);
  return s;
}

__device__ __forceinline__ int m_blocks_of(const VarlenPrepareParams& p, const Sequence& s) {
  return (s.seq_q + p.bm - 1) / p.bm;
}

// Sequence b's sort key: its work (causal: its m-blocks), largest first,
// then b; past the batch, last.
__device__ __forceinline__ unsigned long long sort_key(const VarlenPrepareParams& p, int b) {
  if (b >= p.batch) return ~0ull;
  const Sequence s = sequence(p, b);
  const long long m_blocks = m_blocks_of(p, s);
  const long long work = p.causal ? m_blocks : m_blocks * ((s.seq_k + p.bn - 1) / p.bn);
  const unsigned rank = 0x7fffffffu - unsigned(min(work, 0x7fffffffll));
  return (unsigned long long)rank << 32 | unsigned(b);
}

// Ascending bitonic sort of keys[0, n), n a power of two.
__device__ __forceinline__ void bitonic_sort(unsigned long long* keys, int n) {
  for (int k = 2; k <= n; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int partner = i ^ j;
        if (partner > i) {
          const unsigned long long a = keys[i], b = keys[partner];
          if ((a > b) == ((i & k) == 0)) {
            keys[i] = b;
            keys[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// Ascending bitonic sort of one key per lane of a warp.
__device__ __forceinline__ unsigned long long warp_sort(unsigned long long key) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 2; k <= 32; k *= 2) {
#pragma unroll
    for (int j = k / 2; j > 0; j /= 2) {
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, j);
      // The pair's lower lane keeps the smaller key in an ascending run.
      const bool keep_smaller = ((lane & j) == 0) == ((lane & k) == 0);
      key = keep_smaller ? min(key, other) : max(key, other);
    }
  }
  return key;
}

// Inclusive prefix sum of one value per lane of a warp.
__device__ __forceinline__ int warp_inclusive_scan(int value) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, value, d);
    if (lane >= d) value += other;
  }
  return value;
}

// Exclusive prefix sum of one value per thread, over the block.
__device__ __forceinline__ int block_exclusive_scan(int value, int* warp_totals) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int inclusive = warp_inclusive_scan(value);
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) warp_totals[lane] = warp_inclusive_scan(warp_totals[lane]);  // over warps 0..lane
  __syncthreads();
  return inclusive - value + (warp > 0 ? warp_totals[warp - 1] : 0);
}

__device__ __forceinline__ void write_tile(const VarlenPrepareParams& p, int slot, int b, const Sequence& s, int m) {
  const int causal_offset = p.bottom_right ? s.seq_k - s.seq_q : 0;
  if (slot < p.max_tiles) p.tiles[slot] = VarlenTile{s.q_row, s.k_row, s.seq_q, s.seq_k, m, causal_offset, b, 0};
}

// Exclusive prefix sums of value(i) for i in [0, n), n <= kSortedMax, into
// sums[0, n] (sums[n] the total): kThreads at a time.
template <class Value>
__device__ __forceinline__ void prefix_sums(int n, Value value, int* sums, int* warp_totals) {
  int carried = 0;
  for (int first = 0; first < n; first += kThreads) {
    const int i = first + int(threadIdx.x);
    const int x = i < n ? value(i) : 0;
    const int offset = carried + block_exclusive_scan(x, warp_totals);
    if (i < n) sums[i] = offset;
    carried += warp_totals[kWarps - 1];
    __syncthreads();  // warp_totals is read before the next chunk's scan writes it
  }
  if (threadIdx.x == 0) sums[n] = carried;
  __syncthreads();
}

// The first i in [lo, hi) with !before(i), for a predicate true on a prefix.
template <class Before>
__device__ __forceinline__ int partition_point(int lo, int hi, Before before) {
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Causal, in groups by level. With the sequences sorted by m-blocks (most
// first), mb_i the i-th one's, the sequences of a group are those whose
// keys before them (key_sums) fall in one multiple of group_key_rows: a
// range [g0, g1). The group's tiles start after all tiles of the groups
// before it (tile_sums[g0]); its level l starts after sum over the group of
// min(mb_j, l), which is l times the c sequences with mb_j >= l plus the
// m-blocks of the rest (sorted, so they are the group's last); sequence i's
// tile of level l goes i - g0 slots further. Returns the tiles placed.
__device__ __forceinline__ int place_by_level(const VarlenPrepareParams& p, const unsigned long long* order,
                                              int* sorted_m_blocks, int* tile_sums, int* key_sums,
                                              int* warp_totals) {
  if (p.batch <= 32) {
    if (threadIdx.x < 32) {
      const int i = threadIdx.x;
      const Sequence s = i < p.batch ? sequence(p, int(unsigned(order[i]))) : Sequence{};
      const int m_blocks = i < p.batch ? m_blocks_of(p, s) : 0;
      const int tiles = warp_inclusive_scan(m_blocks), keys = warp_inclusive_scan(s.seq_k);
      if (i < p.batch) {
        sorted_m_blocks[i] = m_blocks;
        tile_sums[i] = tiles - m_blocks;
        key_sums[i] = keys - s.seq_k;
      }
      if (i == 31) {
        tile_sums[p.batch] = tiles;
        key_sums[p.batch] = keys;
      }
    }
    __syncthreads();
  } else {
    for (int i = threadIdx.x; i < p.batch; i += kThreads) {
      sorted_m_blocks[i] = m_blocks_of(p, sequence(p, int(unsigned(order[i]))));
    }
    __syncthreads();
    prefix_sums(p.batch, [&](int i) { return sorted_m_blocks[i]; }, tile_sums, warp_totals);
    prefix_sums(p.batch, [&](int i) { return sequence(p, int(unsigned(order[i]))).seq_k; }, key_sums, warp_totals);
  }
  const int budget = max(p.group_key_rows, 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = warp; i < p.batch; i += kWarps) {
    const int b = int(unsigned(order[i]));
    const int m_blocks = sorted_m_blocks[i];
    const int group = key_sums[i] / budget;
    const int g0 = partition_point(0, i, [&](int j) { return key_sums[j] / budget < group; });
    const int g1 = partition_point(i + 1, p.batch, [&](int j) { return key_sums[j] / budget == group; });
    const Sequence s = sequence(p, b);
    for (int m = lane; m < m_blocks; m += 32) {
      const int level = m_blocks - 1 - m;
      const int c = partition_point(g0, g1, [&](int j) { return sorted_m_blocks[j] >= level; }) - g0;
      const int level_start = level * c + tile_sums[g1] - tile_sums[g0 + c];
      write_tile(p, tile_sums[g0] + level_start + (i - g0), b, s, m);
    }
  }
  return tile_sums[p.batch];
}

// Sequence by sequence (in sorted order when `order`, else by index),
// kThreads at a time: each one's first slot (a scan of their m-block
// counts), then each warp writes the tiles of some of them, its lanes taking
// the m-blocks (causal: last m-block first). Returns the tiles placed.
__device__ __forceinline__ int place_by_sequence(const VarlenPrepareParams& p, const unsigned long long* order,
                                                 int* chunk_sequence, int* chunk_offset, int* warp_totals) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int placed = 0;
  for (int first = 0; first < p.batch; first += kThreads) {
    const int i = first + int(threadIdx.x);
    const int b = i >= p.batch ? -1 : order != nullptr ? int(unsigned(order[i])) : i;
    const int count = b < 0 ? 0 : m_blocks_of(p, sequence(p, b));
    const int offset = placed + block_exclusive_scan(count, warp_totals);
    chunk_sequence[threadIdx.x] = b;
    chunk_offset[threadIdx.x] = offset;
    placed += warp_totals[kWarps - 1];  // the chunk's total
    __syncthreads();
    for (int j = warp; j < kThreads && chunk_sequence[j] >= 0; j += kWarps) {
      const int sb = chunk_sequence[j];
      const Sequence s = sequence(p, sb);
      const int m_blocks = m_blocks_of(p, s);
      for (int m = lane; m < m_blocks; m += 32) {
        write_tile(p, chunk_offset[j] + (p.causal ? m_blocks - 1 - m : m), sb, s, m);
      }
    }
    __syncthreads();  // the chunk's arrays and warp_totals are read before the next chunk writes them
  }
  return placed;
}

__global__ void __launch_bounds__(kThreads, 1) varlen_prepare(const __grid_constant__ VarlenPrepareParams p) {
  static_assert(kWarps == 32, "the scan's second level is one warp");
  __shared__ unsigned long long order[kSortedMax];  // sort keys; the low word is the sequence
  // By level: the sorted m-blocks and the two prefix sums; by sequence:
  // one chunk's sequences and first slots.
  __shared__ int per_sequence[kSortedMax], sums_a[kSortedMax + 1], sums_b[kSortedMax + 1];
  __shared__ int warp_totals[kWarps];
  // With programmatic dependent launch this grid starts while the previous
  // kernel in the stream may still run: it may write cu_seqlens, or read the
  // tiles of the workspace (the previous ragged call's attention kernel).
  grid_dependency_wait();
  // The attention kernel may start launching (its CTAs wait for this grid
  // to complete before reading the tiles).
  launch_dependent_grids();

  const bool sorted = p.batch <= kSortedMax;
  if (p.batch <= 32) {
    if (threadIdx.x < 32) order[threadIdx.x] = warp_sort(sort_key(p, threadIdx.x));
    __syncthreads();
  } else if (sorted) {
    int n = 1;
    while (n < p.batch) n *= 2;
    for (int i = threadIdx.x; i < n; i += kThreads) order[i] = sort_key(p, i);
    __syncthreads();
    bitonic_sort(order, n);
  }
  static_assert(kSortedMax >= kThreads, "a chunk's arrays fit in the sequences'");
  const int placed = sorted && p.causal
                         ? place_by_level(p, order, per_sequence, sums_a, sums_b, warp_totals)
                         : place_by_sequence(p, sorted ? order : nullptr, per_sequence, sums_a, warp_totals);
  if (threadIdx.x == 0) *p.tile_count = min(placed, p.max_tiles);

  if (p.first_bad != nullptr) {
    for (int b = threadIdx.x; b < p.batch; b += kThreads) {
      if (sequence(p, b).bad) atomicMin(p.first_bad, b);
    }
  }
}

}  // namespace cujit::varlen
