// The persistent walk of the sm90 kernel: which (batch, head, m-block) tile a
// CTA takes next. Producer and consumers walk it in step, each on its own.
#pragma once
#include "attention/sm90/attn_params_sm90.h"
#include "attention/varlen/varlen_params.h"
#include "common/ptx.cuh"

namespace cujit::sm90 {

// One tile: its m-block and head, and its sequence's bounds. q_row, k_row
// and batch are the sequence's coordinates in the TMA maps (and the LSE):
// 0, 0 and b for a dense batch, packed row offsets and 0 for a ragged one.
// sequence is b in both (FP8's descale factors are per sequence).
struct Tile {
  int m_block, head, batch;
  int q_row, k_row;
  int seq_q, seq_k, causal_offset;  // key j visible to query i iff j < seq_k and (causal) j <= i + causal_offset
  int sequence;
};

// The tile at a position of the CTAs' walk: (batch, head) pairs in groups
// of group_heads, within a group one m-block of every pair after another
// (1: the m-blocks of one pair together, sharing its K/V in L2; every pair:
// tiles of equal length together; jit/attention/sm90/tile_order.h says
// which the host picks). Causal tiles run longest (last m-block) first.
// KV_CACHE: sequence b's keys are its length (clamped to the cache's
// attn.seq_k), its causal diagonal bottom-right to them.
template <bool CAUSAL, bool KV_CACHE>
__device__ __forceinline__ Tile dense_tile_at(int index, const Sm90AttnParams& p) {
  const unsigned group = p.tile_divisor.quotient(index);
  const unsigned within = p.tile_divisor.remainder(index, group);
  const unsigned first = group * unsigned(p.group_heads);
  // A uniform choice (launch parameters only): the last group may be short.
  const FastDivisor by = first + unsigned(p.group_heads) > unsigned(p.pairs) ? p.last_group_divisor : p.group_divisor;
  const int m = int(by.quotient(within));
  const unsigned bh = first + by.remainder(within, unsigned(m));
  const unsigned batch = p.head_divisor.quotient(bh);
  const AttnParams& a = p.attn;
  int seq_k = a.seq_k;
  if constexpr (KV_CACHE) {
    if (p.seq_lens != nullptr) seq_k = min(max(p.seq_lens[batch], 0), a.seq_k);
  }
  return {CAUSAL ? p.m_blocks - 1 - m : m, int(p.head_divisor.remainder(bh, batch)), int(batch), 0, 0,
          a.seq_q, seq_k, KV_CACHE ? a.causal_offset + seq_k - a.seq_k : a.causal_offset, int(batch)};
}

// A ragged batch: every head of the prepare step's tile index / heads_q, in
// its order (the most work first).
__device__ __forceinline__ Tile varlen_tile_at(int index, const Sm90AttnParams& p) {
  const unsigned entry = p.head_divisor.quotient(index);
  const VarlenTile v = p.attn.varlen_tiles[entry];
  return {v.m_block, int(p.head_divisor.remainder(index, entry)), 0, v.q_row, v.k_row, v.seq_q, v.seq_k,
          v.causal_offset, v.sequence};
}

// The CTA's tile in round r: rounds of gridDim.x consecutive tiles, dealt
// in alternating directions. With causal tiles of a head running longest
// to shortest, one direction alone would hand some CTAs the long end of
// every round; alternating evens out what each CTA gets.
__device__ __forceinline__ int tile_index(int round) {
  return round * int(gridDim.x) + (round % 2 == 0 ? int(blockIdx.x) : int(gridDim.x - 1 - blockIdx.x));
}

// body(i, tile) for this CTA's i-th tile, i = 0, 1, ...
template <bool CAUSAL, bool VARLEN, bool KV_CACHE, class Body>
__device__ __forceinline__ void for_each_tile(const Sm90AttnParams& p, Body&& body) {
  // A ragged batch's tiles are the prepare step's output: with programmatic
  // dependent launch this kernel may start before that step ends.
  if constexpr (VARLEN) grid_dependency_wait();
  const int total_tiles = VARLEN ? *p.attn.varlen_tile_count * p.attn.heads_q : p.total_tiles;
  for (int tile_iter = 0, index; (index = tile_index(tile_iter)) < total_tiles; ++tile_iter) {
    if constexpr (VARLEN) {
      // The next tile's entry into L1 now, so that its load does not stall
      // the start of the next tile on L2.
      const int next = tile_index(tile_iter + 1);
      if (next < total_tiles) prefetch_l1(p.attn.varlen_tiles + p.head_divisor.quotient(next));
    }
    body(tile_iter, VARLEN ? varlen_tile_at(index, p) : dense_tile_at<CAUSAL, KV_CACHE>(index, p));
  }
}

}  // namespace cujit::sm90
