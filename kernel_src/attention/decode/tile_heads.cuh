// Which KV head, packed row and column a decode tile's row and column belong
// to. PAIRED (attn_decode.cu): the tile holds KV heads 2y and 2y + 1, each
// with p.rows packed rows (head 2y's first) and kHeadD columns (head 2y's
// first); a row keeps only its own head's columns. Unpaired every mapping is
// the identity, KV head y, so that code compiles as it did before pairing.
// Then, for any decode, the query head and position of a KV head's row.
#pragma once
#include "attention/decode/decode_params.h"

namespace cujit::decode {

// r: a packed row of the tile's KV head(s), counted from the first (m0
// included); y: blockIdx.y.
template <bool PAIRED, int kHeadD>
struct TileHeads {
  // 1 for head 2y + 1's rows, else 0.
  static __device__ __forceinline__ int half(const DecodeParams& p, int r) { return PAIRED && r >= p.rows ? 1 : 0; }
  static __device__ __forceinline__ int kv_head(const DecodeParams& p, int y, int r) {
    return PAIRED ? 2 * y + half(p, r) : y;
  }
  // The packed row within its KV head: position r / group, query head r % group.
  static __device__ __forceinline__ int row_in_head(const DecodeParams& p, int r) { return r - half(p, r) * p.rows; }
  // Whether tile column col is in row r's own head.
  static __device__ __forceinline__ bool owns(const DecodeParams& p, int r, int col) {
    return !PAIRED || col / kHeadD == half(p, r);
  }
  static __device__ __forceinline__ int column_in_head(int col) { return PAIRED ? col % kHeadD : col; }
};

// Packed row r of a KV head (r counted within that head) is query position
// r / group of query head kv_head * group + r % group.
struct QueryRow {
  int pos, head;
};
// Params: DecodeParams or DecodeCombineParams (group, group_div).
template <class Params>
__device__ __forceinline__ QueryRow query_row(const Params& p, int kv_head, int r) {
  const int pos = int(p.group_div.quotient(unsigned(r)));
  return {pos, kv_head * p.group + (r - pos * p.group)};
}

}  // namespace cujit::decode
