// A (ROWS, D) tile of ELEMENT_BYTES-byte elements in shared memory, stored
// in 16-byte chunks whose column index is XOR-swizzled by the row, so that
// ldmatrix (8 rows, same column) and the cp.async fill both touch 8
// distinct banks. Rows of 128 bytes or more swizzle by row % 8; 64-byte rows
// (D = 64 in FP8), two to a 128-byte line, by (row / 2) % 4.
#pragma once
#include "common/ptx.cuh"

namespace cujit {

template <int ROWS, int D, int ELEMENT_BYTES>
struct SmemTile {
  static_assert(ELEMENT_BYTES == 1 || ELEMENT_BYTES == 2, "16-bit or 8-bit elements");
  static constexpr int kChunkElements = 16 / ELEMENT_BYTES;
  static constexpr int kChunkShift = ELEMENT_BYTES == 2 ? 3 : 4;  // log2(kChunkElements)
  static constexpr int kChunks = D / kChunkElements;  // 16-byte chunks per row
  static_assert(kChunks % 8 == 0 || kChunks == 4, "the swizzle needs rows of 64 bytes or a multiple of 128");
  static constexpr int kBytes = ROWS * D * ELEMENT_BYTES;

  // Byte offset of element (row, col); col is a multiple of kChunkElements
  // or lies within one chunk (its offset in the chunk is kept).
  __device__ static __forceinline__ u32 offset(int row, int col) {
    const int swizzle = kChunks == 4 ? (row >> 1) & 3 : row & 7;
    const int chunk = (col >> kChunkShift) ^ swizzle;
    return u32((row * D + (chunk << kChunkShift) + (col & (kChunkElements - 1))) * ELEMENT_BYTES);
  }

  // Async copy of rows [0, rows_valid) from global (row stride in elements);
  // rows past rows_valid are zero-filled so they can never inject NaN.
  template <int THREADS>
  __device__ static __forceinline__ void load_async(u32 smem, const void* gmem, i64 row_stride, int rows_valid,
                                                    int tid) {
    constexpr int kTotal = ROWS * kChunks;
    constexpr int kIters = (kTotal + THREADS - 1) / THREADS;
    const char* base = static_cast<const char*>(gmem);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int idx = it * THREADS + tid;
      if (kTotal % THREADS == 0 || idx < kTotal) {
        const int row = idx / kChunks;
        const int col = (idx % kChunks) * kChunkElements;
        const bool valid = row < rows_valid;
        const char* src = valid ? base + (row * row_stride + col) * ELEMENT_BYTES : base;
        cp_async_cg_16(smem + offset(row, col), src, valid ? 16 : 0);
      }
    }
  }
};

// A (ROWS, D) tile of 16-bit elements as warpgroup MMAs read it with the
// 128-byte swizzle (the sm90 family's TMA layout): D / 64 column chunks, each
// ROWS rows of 128 bytes, whose 16-byte units are XOR-swizzled by row % 8.
// The hardware swizzles address bits 4-6 by bits 7-9, which is the same
// thing when the tile starts 1024-byte aligned.
template <int ROWS, int D>
struct SmemTileSw128 {
  static_assert(D % 64 == 0, "whole 64-column chunks");
  static_assert(ROWS % 8 == 0, "whole 8-row swizzle atoms");
  static constexpr int kBytes = ROWS * D * 2;

  // Byte offset of element (row, col); as SmemTile's.
  __device__ static __forceinline__ u32 offset(int row, int col) {
    const int unit = ((col >> 3) & 7) ^ (row & 7);
    return u32((col >> 6) * ROWS * 128 + row * 128 + unit * 16 + (col & 7) * 2);
  }
};

}  // namespace cujit
