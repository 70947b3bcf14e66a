// Ragged (variable-length) batches: the tile list a plan's first step builds
// on the device from cu_seqlens, and the parameters of that step. Plain data
// and constexpr C++, so NVRTC and the host compiler both accept it as is.
#pragma once
#include "common/host_device.h"

namespace cujit {

// One (sequence, m-block) tile of a ragged batch, for every query head: what
// the attention kernels need of its sequence, clamped to the tensors (the
// prepare step never hands out a row past them, whatever cu_seqlens holds).
struct alignas(16) VarlenTile {
  int q_row;          // the sequence's query 0 in the packed q / o / lse rows
  int k_row;          // its key 0 in the packed k / v rows
  int seq_q;          // its query rows (the tile covers m_block * BM onwards)
  int seq_k;          // its keys
  int m_block;        // the tile's block of BM rows within the sequence
  int causal_offset;  // key j visible to the sequence's query i iff j <= i + causal_offset
  int sequence;       // b
  int pad;
};

// Tiles of BM rows of `rows` rows: every tile of a ragged batch is in one
// sequence, so ceil(total / BM) plus one partial tile per sequence bounds the
// list (the workspace the host sizes).
CUJIT_HOST_DEVICE constexpr long long varlen_max_tiles(long long total_rows, long long batch, int bm) {
  return (total_rows + bm - 1) / bm + batch;
}

struct VarlenPrepareParams {
  const int* cu_seqlens_q;  // [batch + 1] prefix sums of the sequences' query rows
  const int* cu_seqlens_k;  // [batch + 1] of their keys
  int batch;
  int total_q, total_k;  // rows of the packed q and k
  int max_seq_q, max_seq_k;
  int bm, bn;  // the attention kernel's tile
  int causal, bottom_right;
  int group_key_rows;  // causal: the keys whose K/V a group of sequences keeps in L2 (varlen_prepare.cu)
  int max_tiles;       // VarlenTile slots at `tiles`
  VarlenTile* tiles;   // out: in the order the attention kernel takes them (varlen_prepare.cu)
  int* tile_count;     // out: tiles written
  int* first_bad;      // CUJIT_CHECK: the first b whose cu_seqlens entries are wrong (atomic min), or null
};

}  // namespace cujit
