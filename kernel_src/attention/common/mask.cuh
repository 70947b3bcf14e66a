// Masks one (16, BN) score block per m-tile: keys past Sk, and with causal
// masking keys after the query's diagonal (key j visible iff j <= i + offset).
#pragma once
#include "common/types.cuh"

namespace cujit {

// The keys a row may see: j < seq_k and, with a causal mask, j <= i + causal_offset.
struct KeyLimit {
  int seq_k, causal_offset;
};

template <int MT, int NT, bool CAUSAL>
__device__ __forceinline__ void apply_mask(float (&s)[MT][NT][4], int row0, int col0, int seq_k, int causal_offset,
                                           int lane) {
  const float neg_inf = -__int_as_float(0x7f800000);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + mt * 16 + lane / 4 + 8 * r;
      const int col_limit = CAUSAL ? min(seq_k, row + causal_offset + 1) : seq_k;  // first hidden key
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col0 + nt * 8 + 2 * (lane % 4) + e;
          if (col >= col_limit) s[mt][nt][2 * r + e] = neg_inf;
        }
      }
    }
  }
}

}  // namespace cujit
