// Online softmax over one (16, BN) score block per m-tile, in the mma.sync
// accumulator layout: each thread holds rows g and g+8 (g = lane / 4), and the
// four threads of a quad together hold a whole row. Row sums stay per-thread
// partials until the end (the rescale factor is uniform across the quad).
#pragma once
#include "attention/common/register_tile.cuh"

namespace cujit {

template <int MT, int NT, int DT>
struct OnlineSoftmax {
  float row_max[MT][2];  // raw (unscaled) running max per row
  float row_sum[MT][2];  // this thread's partial sum of exp2
  float scale_log2;

  __device__ __forceinline__ explicit OnlineSoftmax(float scale) : scale_log2(scale) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        row_max[mt][r] = -__int_as_float(0x7f800000);
        row_sum[mt][r] = 0.f;
      }
    }
  }

  // Scores in s become probabilities (unnormalized); o is rescaled.
  __device__ __forceinline__ void update(float (&s)[MT][NT][4], float (&o)[MT][DT][4]) {
    float correction[MT][2];
    update_scores(s, correction);
    rescale(o, correction);
  }

  // The two halves of update, for kernels that rescale o later (once the
  // matrix unit has finished writing it): scores -> probabilities, with the
  // factor o must be multiplied by.
  __device__ __forceinline__ void update_scores(float (&s)[MT][NT][4], float (&correction)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_max[mt][r];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        mx = quad_max(mx);
        // A row with nothing visible yet keeps max -inf: use 0 as the offset so
        // exp2(-inf - 0) = 0 instead of NaN.
        const float m_scaled = mx == -__int_as_float(0x7f800000) ? 0.f : mx * scale_log2;
        correction[mt][r] = ex2_approx(row_max[mt][r] * scale_log2 - m_scaled);
        row_max[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          s[mt][nt][2 * r] = ex2_approx(fmaf(s[mt][nt][2 * r], scale_log2, -m_scaled));
          s[mt][nt][2 * r + 1] = ex2_approx(fmaf(s[mt][nt][2 * r + 1], scale_log2, -m_scaled));
          sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
        }
        row_sum[mt][r] = row_sum[mt][r] * correction[mt][r] + sum;
      }
    }
  }

  __device__ __forceinline__ static void rescale(float (&o)[MT][DT][4], const float (&correction)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o[mt][dt][2 * r] *= correction[mt][r];
          o[mt][dt][2 * r + 1] *= correction[mt][r];
        }
  }

  // Full row sum (quad reduction); call once, after the last block.
  __device__ __forceinline__ float total_sum(int mt, int r) const {
    return quad_sum(row_sum[mt][r]);
  }

  // The epilogue's factor for a row with total sum l. A row that saw no
  // visible key (l == 0) is defined as zeros: the factor is 0. NaN in l (NaN
  // in the inputs) stays NaN, as in a float64 reference.
  __device__ __forceinline__ static float normalizer(float l) { return rcp_approx_or_zero(l); }

  // The row's log-sum-exp in natural log; -inf for a row with no visible key
  // (l == 0), NaN when l is NaN. A select, not a branch.
  __device__ __forceinline__ float lse(int mt, int r, float l) const {
    constexpr float kLn2 = 0.6931471805599453f;
    const float neg_inf = -__int_as_float(0x7f800000);
    return l == 0.f ? neg_inf : (row_max[mt][r] * scale_log2 + lg2_approx(l)) * kLn2;
  }
};

}  // namespace cujit
