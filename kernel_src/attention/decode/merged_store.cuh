// The last step of merging a split decode's parts, shared by the combine
// pass (attn_decode_combine.cu) and the cluster merge (cluster_merge.cuh):
// four output columns of one packed row, the weighted sum of the parts over
// the sum of their weights, and the row's LSE from the thread holding
// column 0.
#pragma once
#include "attention/decode/decode_params.h"
#include "attention/decode/tile_heads.cuh"
#include "common/ptx.cuh"

namespace cujit::decode {

// Params: DecodeParams or DecodeCombineParams (o, o_stride, lse, heads_kv,
// group, seq_q, group_div). r: the packed row; col: its first of the four
// columns; acc: the weighted sums; sum: the weights' sum; mx: the largest
// part's log2-sum-exp (its weight is 1).
template <class T, class Params>
__device__ __forceinline__ void store_merged_columns(const Params& p, int batch, int head_kv, int r, int col,
                                                     const float (&acc)[4], float sum, float mx) {
  constexpr float kLn2 = 0.6931471805599453f;
  const QueryRow q = query_row(p, head_kv, r);
  const float inv = rcp_approx_or_zero(sum);
  char* dst =
      static_cast<char*>(p.o) + (batch * p.o_stride[0] + q.head * p.o_stride[1] + q.pos * p.o_stride[2] + col) * 2;
  st_global_v2_b32(dst, cvt_rn_x2<T>(acc[0] * inv, acc[1] * inv), cvt_rn_x2<T>(acc[2] * inv, acc[3] * inv));
  if (p.lse != nullptr && col == 0) {
    p.lse[(i64(batch) * p.heads_kv * p.group + q.head) * p.seq_q + q.pos] =
        sum == 0.f ? -__int_as_float(0x7f800000) : (mx + lg2_approx(sum)) * kLn2;
  }
}

}  // namespace cujit::decode
