// The one kernel argument of every attention family: plain data shared by the
// host (which fills it) and device code (which reads it). No includes, so
// NVRTC and the host compiler both accept it as is.
#pragma once

namespace cujit {

struct VarlenTile;  // attention/varlen/varlen_params.h

struct AttnParams {
  // A ragged batch is one batch of packed rows: q [1, Hq, total_q, D], k and
  // v [1, Hkv, total_k, D], lse [Hq, total_q]; seq_q and seq_k are then the
  // packed row counts, and each tile's sequence comes from `varlen_tiles`.
  const void* q;  // [B, Hq, Sq, D] through the strides below
  const void* k;  // [B, Hkv, Sk, D]
  const void* v;  // [B, Hkv, Sk, D]
  void* o;        // [B, Hq, Sq, D]
  float* lse;     // [B, Hq, Sq] contiguous natural-log sum-exp, or null
  // Strides in elements: batch, head, row. The head dimension is contiguous.
  long long q_stride[3];
  long long k_stride[3];
  long long v_stride[3];
  long long o_stride[3];
  int batch;
  int heads_q;
  int heads_kv;
  int seq_q;
  int seq_k;
  int group;          // heads_q / heads_kv: query heads sharing one K/V head
  float scale_log2;   // softmax scale * log2(e): scores go through exp2
  int causal_offset;  // causal: key j is visible to query i iff j <= i + causal_offset
  // Ragged batches: the tiles the prepare step wrote and their count (read on
  // the device); null otherwise.
  const VarlenTile* varlen_tiles;
  const int* varlen_tile_count;
  // FP8 inputs (q, k, v in e4m3): float32 factors of (batch b, KV head h) at
  // [b * descale_stride[0] + h * descale_stride[1]]; null otherwise.
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  long long descale_stride[2];
};

}  // namespace cujit
