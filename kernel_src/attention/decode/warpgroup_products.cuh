// A decode block's two products by warpgroup MMAs (sm_90a), for tiles of 64
// packed rows over a 16-bit cache (attn_decode.cu, WG). Each warpgroup takes
// all 64 rows and KW of the block's keys; Q, K and V sit in shared memory in
// the 128-byte-swizzled layout (SmemTileSw128), where the cp.async ring put
// them. A warp's accumulators are the mma.sync m16n8 layout of its 16 rows
// (wgmma_ops.cuh), so the softmax, the masks and the merge of the mma.sync
// path serve these unchanged.
//
// Unlike mma.sync, the tensor pipe reads each K and V byte once per
// warpgroup rather than once per warp of 16 rows, and a warp issues one
// instruction per 16 keys by 64 rows of a product instead of one per 8 by 16.
#pragma once
#include "attention/sm90/wgmma_ops.cuh"
#include "common/ptx_sm90.cuh"

namespace cujit::decode {

// Issues S (64, KW) = Q K^T over the head dim, 16 columns a step: 32 bytes
// apart inside a 128-byte row, then on to the next 64-column chunk. sQ: the
// 64-row Q tile; k_keys: the warpgroup's first key row in the stage (which
// holds BN rows a chunk). The caller commits and waits.
template <int D, int KW, int BN, class T>
__device__ __forceinline__ void issue_warpgroup_scores(float (&s)[KW / 8][4], u32 sQ, u32 k_keys) {
  sm90::fence_accumulators(s);
  sm90::wgmma_fence();
#pragma unroll
  for (int kt = 0; kt < D / 16; ++kt) {
    const u32 in_row = u32(kt % 4) * 32;
    const u32 chunk = u32(kt / 4);
    const sm90::u64 desc_q = sm90::smem_descriptor_sw128(sQ + chunk * 64 * 128 + in_row, 16, 1024);
    const sm90::u64 desc_k = sm90::smem_descriptor_sw128(k_keys + chunk * BN * 128 + in_row, 16, 1024);
    sm90::Wgmma<KW, T>::ss(s, desc_q, desc_k, kt > 0 ? 1 : 0);
  }
}

// Issues O (64, D) += P V for the warpgroup's KW keys: P as A fragments in
// registers, V head-dim contiguous (MN-major), 16 keys a step, its 64-column
// chunks BN rows apart. v_keys: the warpgroup's first key row in the stage.
// The caller commits and waits.
template <int D, int KW, int BN, class T>
__device__ __forceinline__ void issue_warpgroup_pv(float (&o)[D / 8][4], const u32 (&p)[KW / 16][4], u32 v_keys) {
  sm90::fence_accumulators(o);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < KW / 16; ++kk) {
    const sm90::u64 desc_v = sm90::smem_descriptor_sw128(v_keys + u32(kk) * 16 * 128, BN * 128, 1024);
    sm90::Wgmma<D, T>::rs(o, p[kk], desc_v, 1);
  }
}

}  // namespace cujit::decode
