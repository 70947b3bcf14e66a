// Shared memory of the decode kernel, for the kernel and the host's launch
// and pruning alike. Plain constexpr C++.
#pragma once
#include "common/host_device.h"

namespace cujit {

// The cross-warp merge's fp32 rows are padded so that a quad's stores to
// rows eight apart fall in different banks.
CUJIT_HOST_DEVICE constexpr int decode_merge_row_floats(int d) { return d + 4; }

// KV heads of a tile whose keys carry their own descale factors (descale per
// page): the tile's KV heads (two when paired), else none.
CUJIT_HOST_DEVICE constexpr int decode_page_factor_heads(bool page_descale, bool paired) {
  return page_descale ? (paired ? 2 : 1) : 0;
}

// While the keys stream: Q (BM, D) in 16-bit elements and the K and V rings
// in kv_bytes-byte ones (2, or 1 for an FP8 cache); paged, 2 * STAGES slots
// of BN int32 page ids after them, and with factor_heads (descale per page)
// each stage's K and V factors, float32 [2][factor_heads][BN].
CUJIT_HOST_DEVICE constexpr int decode_stream_bytes(int d, int bm, int bn, int stages, bool paged, int kv_bytes,
                                                    int factor_heads) {
  return bm * d * 2 + 2 * stages * bn * d * kv_bytes + (paged ? 2 * stages * bn * 4 : 0) +
         stages * 2 * factor_heads * bn * 4;
}

// Tiles multiplied by warpgroup MMAs (attn_decode.cu, WG) start at the
// next 1024-byte boundary, where the 128-byte swizzle's atoms must: the host
// asks for that much more shared memory.
constexpr int kDecodeWgAlign = 1024;

// Paged, each load pass of a block (rows a thread loads) looks its key's page
// up; more than 16 passes (D = 256 at two warps and 64 keys: 32) spill on
// sm_90a.
constexpr int kMaxPagedLoadPasses = 16;

// Warps across a block's rows: one per 16 rows, and one for a block of 8
// (keys_as_rows.cuh), whose warps all share its rows.
CUJIT_HOST_DEVICE constexpr int decode_row_warps(int bm) { return bm < 16 ? 1 : bm / 16; }

// Afterwards, from the start: the merge rows (WN, BM, D + 4) fp32 and the row
// max and sum of each of the WN = WARPS / decode_row_warps(BM) warps that
// share a row.
CUJIT_HOST_DEVICE constexpr int decode_merge_bytes(int d, int bm, int warps) {
  return warps / decode_row_warps(bm) * bm * (decode_merge_row_floats(d) + 2) * 4;
}

// sm_90, splits merged in the cluster (attention/decode/cluster_merge.cuh):
// the two splits' normalized parts of the BM / 2 rows this CTA merges and
// their log2-sum-exps, in float32, after the merge buffer.
CUJIT_HOST_DEVICE constexpr int decode_cluster_part_bytes(int d, int bm) { return bm * (d + 1) * 4; }
// The variants that carry the cluster merge: with 64 packed rows or head dim
// 256 its code spills (ptxas, sm_90a), so those keep the combine pass.
CUJIT_HOST_DEVICE constexpr bool decode_cluster_mergeable(int d, int bm) { return d <= 128 && bm <= 32; }

// Over an FP8 cache, blocks of 8 rows merging in their cluster push their
// parts into the merging CTA (cluster_merge.cuh), which waits for their bytes
// on an mbarrier of its own.
CUJIT_HOST_DEVICE constexpr bool decode_pushes_parts(int bm, int kv_bytes) { return bm == 8 && kv_bytes == 1; }

// The stream's and the merge's regions, which overlap from the start.
CUJIT_HOST_DEVICE constexpr int decode_regions_bytes(int d, int bm, int bn, int stages, int warps, bool paged,
                                                     int kv_bytes, bool cluster_part, int factor_heads) {
  const int stream = decode_stream_bytes(d, bm, bn, stages, paged, kv_bytes, factor_heads);
  const int merge = decode_merge_bytes(d, bm, warps) + (cluster_part ? decode_cluster_part_bytes(d, bm) : 0);
  return stream > merge ? stream : merge;
}

// The pushed parts' mbarrier: after both regions, since it lives from the
// kernel's start to its end.
CUJIT_HOST_DEVICE constexpr int decode_parts_barrier_offset(int d, int bm, int bn, int stages, int warps, bool paged,
                                                            int kv_bytes, int factor_heads) {
  return (decode_regions_bytes(d, bm, bn, stages, warps, paged, kv_bytes, true, factor_heads) + 7) / 8 * 8;
}

// cluster_part: room for the cluster merge's part (a variant that may merge
// in its cluster on this target), and where it pushes, its barrier;
// factor_heads: decode_page_factor_heads.
CUJIT_HOST_DEVICE constexpr int decode_smem_bytes(int d, int bm, int bn, int stages, int warps, bool paged,
                                                  int kv_bytes, bool cluster_part, int factor_heads) {
  return cluster_part && decode_pushes_parts(bm, kv_bytes)
             ? decode_parts_barrier_offset(d, bm, bn, stages, warps, paged, kv_bytes, factor_heads) + 8
             : decode_regions_bytes(d, bm, bn, stages, warps, paged, kv_bytes, cluster_part, factor_heads);
}

}  // namespace cujit
