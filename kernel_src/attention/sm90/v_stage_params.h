// The FP8 V staging pass (v_stage.cu) and the sm90 kernel that reads its
// output: V transposed to K-major ahead of the attention kernel, in the
// order the in-kernel transposer writes its shared ring (v_transposer.cuh),
// so that the kernel's producer brings each stage in with one TMA box per
// 128-key chunk and no warp touches it. Plain data: NVRTC and the host both
// include it.
#pragma once
#include "attention/sm90/smem_layout.h"

namespace cujit {

constexpr int kVStageThreads = 256;
// The block's rows in the pass's shared memory are D + kVStageRowPad bytes
// apart, so that the 16 keys one thread reads (16 rows apart) spread over
// the banks.
constexpr int kVStageRowPad = 4;

// The staged V: for each (batch, KV head, key block of BN) in that order,
// sm90::transposed_v_chunks(BN) chunks of D rows of sm90::kRowBytes (128
// keys), as one stage of the kernel's transposed ring. Row t of a chunk holds
// head-dim column 16 (t / 16) + 2 (t % 8) + (t % 16) / 8; byte 16 g + i of
// it holds key 128 c + 16 g + 2 (i / 4) + i % 2 + 8 ((i % 4) / 2) of the
// block (the transposer's orders, v_transposer.cuh); keys past the sequence
// or the block are 0.
struct VStageParams {
  const unsigned char* v;       // e4m3 [B, Hkv, S, D] by the strides below (elements)
  long long v_stride[3];        // batch, KV head, key
  unsigned char* staged;        // the output, 128-byte aligned
  int seq_k;
  int heads_kv;
  int block_n;                  // BN: keys per block
  int blocks;                   // ceil(seq_k / BN): key blocks per (batch, KV head)
};

// Row of the staged V where chunk `chunk` of key block `block` of (batch,
// head_kv) starts.
CUJIT_HOST_DEVICE constexpr long long v_stage_row(int batch, int head_kv, int block, int chunk, int heads_kv,
                                                  int blocks, int chunks, int d) {
  return ((((long long)batch * heads_kv + head_kv) * blocks + block) * chunks + chunk) * d;
}

}  // namespace cujit
