// The first step of a ragged batch: one CTA reads cu_seqlens and writes the
// batch's (sequence, m-block) tiles, longest work first, for the attention
// kernel that follows (its persistent CTAs, or its grid, take them in that
// order, so the long causal tiles of long sequences do not run last).
//
// A counting sort on each tile's key-block count, in kBuckets buckets: the
// count of each bucket, their starts in descending order (a block-wide
// scan), then each tile into the next slot of its bucket. Within a bucket
// the order depends on scheduling; the result does not: each tile of output
// is computed by one CTA, whichever it is, with the same arithmetic.
//
// Sequences are clamped to the packed tensors (rows [0, total)) and to the
// maxima, so a wrong cu_seqlens never sends a load or store outside them;
// with first_bad set (CUJIT_CHECK) the first sequence whose entries are
// wrong is reported as well.
#include "attention/common/key_blocks.h"
#include "attention/varlen/varlen_params.h"
#include "common/ptx.cuh"

namespace cujit::varlen {

constexpr int kThreads = 1024;
constexpr int kBuckets = kThreads;  // one per thread in the scan
constexpr int kWarps = kThreads / 32;

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

__device__ __forceinline__ int causal_offset(const VarlenPrepareParams& p, const Sequence& s) {
  return p.bottom_right ? s.seq_k - s.seq_q : 0;
}

// Key blocks of BN keys the tile visits: its weight in the sort.
__device__ __forceinline__ int tile_work(const VarlenPrepareParams& p, const Sequence& s, int m_block) {
  return key_block_range(m_block * p.bm, p.bm, p.bn, s.seq_q, s.seq_k, p.causal != 0, causal_offset(p, s)).count;
}

// Works of 0 .. max_work share the buckets evenly.
__device__ __forceinline__ int bucket_of(int work, int max_work) {
  const int per_bucket = max_work / kBuckets + 1;
  return min(work / per_bucket, kBuckets - 1);
}

// Each warp takes sequences warp, warp + kWarps, ...; its lanes the m-blocks.
template <class Body>
__device__ __forceinline__ void for_each_tile(const VarlenPrepareParams& p, Body&& body) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int b = warp; b < p.batch; b += kWarps) {
    const Sequence s = sequence(p, b);
    const int m_blocks = (s.seq_q + p.bm - 1) / p.bm;
    for (int m = lane; m < m_blocks; m += 32) body(b, s, m);
  }
}

// Exclusive prefix sum of one value per thread, over the block.
__device__ __forceinline__ int block_exclusive_scan(int value, int* warp_totals) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int inclusive = value;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += other;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int total = warp_totals[lane];
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, total, d);
      if (lane >= d) total += other;
    }
    warp_totals[lane] = total;  // inclusive over warps 0..lane
  }
  __syncthreads();
  return inclusive - value + (warp > 0 ? warp_totals[warp - 1] : 0);
}

__global__ void __launch_bounds__(kThreads, 1) varlen_prepare(const __grid_constant__ VarlenPrepareParams p) {
  static_assert(kWarps == 32, "the scan's second level is one warp");
  __shared__ int counts[kBuckets];
  __shared__ int warp_totals[kWarps];
  const int max_work = (p.max_seq_k + p.bn - 1) / p.bn;
  // The attention kernel may start launching (its CTAs wait for this grid
  // to complete before reading the tiles).
  launch_dependent_grids();

  counts[threadIdx.x] = 0;
  __syncthreads();
  for_each_tile(p, [&](int, const Sequence& s, int m) { atomicAdd(&counts[bucket_of(tile_work(p, s, m), max_work)], 1); });
  __syncthreads();

  // Bucket kBuckets - 1 (the most work) first: thread t scans bucket
  // kBuckets - 1 - t, and its exclusive sum is that bucket's first slot.
  const int bucket = kBuckets - 1 - int(threadIdx.x);
  const int count = counts[bucket];
  const int start = block_exclusive_scan(count, warp_totals);
  __syncthreads();  // every count read before it becomes a cursor
  counts[bucket] = start;
  if (threadIdx.x == kThreads - 1) *p.tile_count = min(start + count, p.max_tiles);
  __syncthreads();

  for_each_tile(p, [&](int b, const Sequence& s, int m) {
    const int slot = atomicAdd(&counts[bucket_of(tile_work(p, s, m), max_work)], 1);
    if (slot < p.max_tiles) {
      p.tiles[slot] = VarlenTile{s.q_row, s.k_row, s.seq_q, s.seq_k, m, causal_offset(p, s), b, 0};
    }
  });

  if (p.first_bad != nullptr) {
    for (int b = threadIdx.x; b < p.batch; b += kThreads) {
      if (sequence(p, b).bad) atomicMin(p.first_bad, b);
    }
  }
}

}  // namespace cujit::varlen
