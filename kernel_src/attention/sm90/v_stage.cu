// FP8 V staged transposed for the sm90 kernel (v_stage_params.h): one CTA
// per (key block, KV head, batch) reads the block's BN rows of V with
// 16-byte loads into shared memory (zeros past the sequence), then writes
// the block's chunks, each thread a 16-byte unit (16 keys of one row) at a
// time, picking the bytes in the transposer's key and head-dim orders. It
// runs once per call ahead of the attention kernel, which then reads V as it
// reads K: by TMA, with no warp transposing it beside the MMAs (on the H200
// that copy costs the FP8 kernel 11-25%, docs/perf-log.md fp8 v6).
#include "attention/sm90/v_stage_params.h"

namespace cujit::sm90 {

template <int D>
__global__ void __launch_bounds__(kVStageThreads) attn_v_stage(const __grid_constant__ VStageParams p) {
  static_assert(D % 16 == 0, "D is whole 16-byte units and whole 16-column groups");
  extern __shared__ __align__(16) unsigned char tile[];  // [BN][kPitch]: the block's keys
  constexpr int kPitch = D + kVStageRowPad;
  const int block = blockIdx.x, head_kv = blockIdx.y, batch = blockIdx.z;
  const int bn = p.block_n;
  const int key0 = block * bn;

  constexpr int kUnitsPerRow = D / 16;
  const unsigned char* src = p.v + batch * p.v_stride[0] + head_kv * p.v_stride[1];
  for (int u = threadIdx.x; u < bn * kUnitsPerRow; u += kVStageThreads) {
    const int row = u / kUnitsPerRow, col = (u % kUnitsPerRow) * 16;
    const int key = key0 + row;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key < p.seq_k) x = *reinterpret_cast<const uint4*>(src + key * p.v_stride[2] + col);
    // The pitch is 4-byte aligned only: four word stores.
    unsigned* dst = reinterpret_cast<unsigned*>(tile + row * kPitch + col);
    dst[0] = x.x;
    dst[1] = x.y;
    dst[2] = x.z;
    dst[3] = x.w;
  }
  __syncthreads();

  const int chunks = transposed_v_chunks(bn);
  unsigned char* out = p.staged + v_stage_row(batch, head_kv, block, 0, p.heads_kv, p.blocks, chunks, D) * kRowBytes;
  constexpr int kUnitsPerChunkRow = kRowBytes / 16;  // of 16 keys
  for (int u = threadIdx.x; u < chunks * D * kUnitsPerChunkRow; u += kVStageThreads) {
    const int g = u % kUnitsPerChunkRow;  // keys 16 g .. of the chunk
    const int t = u / kUnitsPerChunkRow % D;
    const int chunk = u / (kUnitsPerChunkRow * D);
    const int column = 16 * (t / 16) + 2 * (t % 8) + (t % 16) / 8;
    const int first = chunk * kRowBytes + 16 * g;  // of the block
    unsigned words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      unsigned word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = 4 * w + b;
        const int key = first + 2 * (i / 4) + i % 2 + 8 * ((i % 4) / 2);
        const unsigned byte = key < bn ? tile[key * kPitch + column] : 0u;
        word |= byte << (8 * b);
      }
      words[w] = word;
    }
    *reinterpret_cast<uint4*>(out + (chunk * D + t) * kRowBytes + 16 * g) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace cujit::sm90
