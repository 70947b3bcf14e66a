// Portable flash-attention forward (FlashAttention-2 structure) for sm_80+:
// each warp owns 16*MT query rows; K/V blocks of BN keys stream through a
// STAGES-deep cp.async ring; S = Q K^T and O += P V run on mma.sync
// m16n8k16 with ldmatrix operands; the softmax is online, in registers.
//
// FP8 (TIN = e4m3, out in T; sm_89+): the same loop at one byte per element
// on m16n8k32. A 32-byte k-step is two 16-byte chunks whatever the element,
// so Q K^T reads its fragments exactly as the 16-bit kernel does. P V takes P
// in a key order that leaves each thread's scores in place
// (to_operand_a_k32); V's fragments come from ldmatrix.trans on byte pairs,
// whose bytes split into that key order by one prmt each, for even and odd
// head-dim columns apart: O's n-tiles alternate even and odd columns, which
// the epilogue writes back in place. The descale factors of (batch, KV head)
// fold into the softmax scale (q, k) and the output's normalizer (v).
#include "attention/attn_params.h"
#include "attention/common/key_blocks.h"
#include "attention/common/mask.cuh"
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/head_dims.h"
#include "attention/common/smem_tile.cuh"
#include "attention/portable/epilogue.cuh"
#include "attention/varlen/varlen_params.h"
#include "common/ptx.cuh"

namespace cujit::portable {

// S += Q K^T for one k-step: m16n8k16 in T, or m16n8k32 in e4m3.
template <class TIN>
__device__ __forceinline__ void mma_qk(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (same_type<TIN, e4m3>::value) {
    mma_m16n8k32<e4m3>(d, a, b0, b1);
  } else {
    mma_m16n8k16<TIN>(d, a, b0, b1);
  }
}

// One CTA's tile: its m-block and head, and its sequence's bounds. q_row,
// k_row and batch locate the sequence in the tensors: 0, 0 and b for a dense
// batch; packed row offsets and 0 for a ragged one.
struct Tile {
  int m_block, head, batch;
  int q_row, k_row;
  int seq_q, seq_k, causal_offset;
  int sequence;  // b in both (FP8's descale factors are per sequence)
};

// Dense: grid (m-blocks, Hq, B), causal tiles near the end of the sequence
// (the longest) launched first. Ragged (VARLEN): a 1-D grid over the prepare
// step's tiles times the heads, heads fastest, in its order (the most work first);
// CTAs past its count have nothing to do.
template <bool CAUSAL, bool VARLEN>
__device__ __forceinline__ bool tile_of_block(const AttnParams& p, Tile& t) {
  if constexpr (VARLEN) {
    grid_dependency_wait();  // the prepare step's tiles (programmatic dependent launch)
    const unsigned entry = blockIdx.x / unsigned(p.heads_q);
    if (int(entry) >= *p.varlen_tile_count) return false;
    const VarlenTile v = p.varlen_tiles[entry];
    t = {v.m_block, int(blockIdx.x - entry * unsigned(p.heads_q)), 0, v.q_row, v.k_row, v.seq_q, v.seq_k,
         v.causal_offset, v.sequence};
  } else {
    t = {CAUSAL ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), 0, 0,
         p.seq_q, p.seq_k, p.causal_offset, int(blockIdx.z)};
  }
  return true;
}

// Dynamic shared memory: Q (BM, D), then STAGES x K (BN, D), then STAGES x V
// (BN, D), in TIN; the epilogue stages the output (BM, D) in T from the start.
template <int D, int BM, int BN, int STAGES, int WARPS, class T, bool CAUSAL, bool VARLEN, class TIN>
__global__ void __launch_bounds__(WARPS * 32, 1) attn_fwd_portable(const __grid_constant__ AttnParams p) {
  static_assert(same_type<T, f16>::value || same_type<T, bf16>::value, "T is f16 or bf16");
  constexpr bool kFp8 = same_type<TIN, e4m3>::value;
  static_assert(kFp8 || same_type<TIN, T>::value, "q, k and v are in T, or e4m3");
  static_assert(kPortableHeadDims.contains(D), "D is one of kPortableHeadDims: 64 or 128");
  static_assert(D % 64 == 0, "D must be a multiple of 64 (swizzle)");
  static_assert(BM % (16 * WARPS) == 0, "each warp owns whole 16-row m-tiles");
  static_assert(BN % 16 == 0, "BN must be a multiple of 16");
  static_assert(STAGES >= 2, "the K/V ring needs at least two stages");

  constexpr int kThreads = WARPS * 32;
  constexpr int kWarpRows = BM / WARPS;
  constexpr int MT = kWarpRows / 16;  // m-tiles per warp
  constexpr int NT = BN / 8;          // n-tiles of S
  constexpr int kInBytes = element_traits<TIN>::bytes;
  constexpr int kChunk = 16 / kInBytes;  // elements per 16-byte chunk
  constexpr int kStep = 2 * kChunk;      // k of one mma: 16 (16-bit) or 32 (e4m3)
  constexpr int KT = D / kStep;          // k-steps of Q K^T
  constexpr int DT = D / 8;              // n-tiles of O
  constexpr int PT = BN / kStep;         // k-steps of P V
  static_assert(BN % kStep == 0, "BN must be a multiple of the mma's k");
  constexpr int kElementBytes = element_traits<T>::bytes;
  using QTile = SmemTile<BM, D, kInBytes>;
  using KVTile = SmemTile<BN, D, kInBytes>;
  static_assert(QTile::kBytes + 2 * STAGES * KVTile::kBytes >= BM * D * kElementBytes,
                "the epilogue stages the output tile over the inputs' space");

  extern __shared__ __align__(128) unsigned char smem[];
  const u32 sQ = smem_addr(smem);
  const u32 sK = sQ + QTile::kBytes;
  const u32 sV = sK + STAGES * KVTile::kBytes;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  Tile t;
  if (!tile_of_block<CAUSAL, VARLEN>(p, t)) return;
  const int head = t.head;
  const int batch = t.batch;
  const int head_kv = head / p.group;
  const int m0 = t.m_block * BM;
  const int rows_valid = min(BM, t.seq_q - m0);

  const char* q_tile =
      static_cast<const char*>(p.q) +
      (batch * p.q_stride[0] + head * p.q_stride[1] + i64(t.q_row + m0) * p.q_stride[2]) * kInBytes;
  const char* k_head = static_cast<const char*>(p.k) +
                       (batch * p.k_stride[0] + head_kv * p.k_stride[1] + i64(t.k_row) * p.k_stride[2]) * kInBytes;
  const char* v_head = static_cast<const char*>(p.v) +
                       (batch * p.v_stride[0] + head_kv * p.v_stride[1] + i64(t.k_row) * p.v_stride[2]) * kInBytes;

  // Key blocks this tile needs; those from first_masked on need a mask.
  const KeyBlockRange blocks = key_block_range(m0, BM, BN, t.seq_q, t.seq_k, CAUSAL, t.causal_offset);
  const int n_blocks = blocks.count;

  // One cp.async group per K/V block; STAGES-1 blocks are in flight ahead of
  // the one being used. Every group is committed even when empty, so the wait
  // counts below are constants.
  auto load_kv = [&](int block) {
    if (block >= n_blocks) return;
    const int stage = block % STAGES;
    const int keys = min(BN, t.seq_k - block * BN);
    const i64 first = i64(block) * BN;
    KVTile::template load_async<kThreads>(sK + stage * KVTile::kBytes, k_head + first * p.k_stride[2] * kInBytes,
                                          p.k_stride[2], keys, tid);
    KVTile::template load_async<kThreads>(sV + stage * KVTile::kBytes, v_head + first * p.v_stride[2] * kInBytes,
                                          p.v_stride[2], keys, tid);
  };

  QTile::template load_async<kThreads>(sQ, q_tile, p.q_stride[2], rows_valid, tid);
  cp_async_commit_group();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    load_kv(s);
    cp_async_commit_group();
  }
  cp_async_wait_group<STAGES - 1>();  // the Q group
  __syncthreads();

  const int warp_row0 = warp * kWarpRows;
  // (16, kStep) A fragment of this warp's Q rows: m-tile mt, k-step kt.
  auto q_frag_addr = [&](int mt, int kt) {
    return sQ + QTile::offset(warp_row0 + mt * 16 + lane % 16, kt * kStep + (lane / 16) * kChunk);
  };
  // With one m-tile per warp, Q lives in registers for the whole loop; with
  // two, its fragments are re-read from shared memory each block, which frees
  // the registers that let each K/V fragment feed two m-tiles.
  constexpr bool kQInRegisters = MT == 1;
  u32 q_frag[kQInRegisters ? MT : 1][kQInRegisters ? KT : 1][4];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) ldmatrix_x4(q_frag[mt][kt], q_frag_addr(mt, kt));
  }

  // FP8: the scores' and the output's factors of this (sequence, KV head).
  float scale_log2 = p.scale_log2, out_scale = 1.f;
  if constexpr (kFp8) {
    const i64 at = t.sequence * p.descale_stride[0] + head_kv * p.descale_stride[1];
    scale_log2 *= p.q_descale[at] * p.k_descale[at];
    out_scale = p.v_descale[at];
  }

  // (16*MT, D) accumulator; FP8: n-tiles 2j and 2j+1 hold the even and the
  // odd columns of columns 16j..16j+15.
  float o[MT][DT][4];
  zero(o);
  OnlineSoftmax<MT, NT, DT> softmax(scale_log2);

  for (int block = 0; block < n_blocks; ++block) {
    cp_async_wait_group<STAGES - 2>();  // K and V of this block have landed...
    // ...for every thread, and every warp is done with block-1, whose stage
    // the next load refills. This is the loop's only barrier: warps drift
    // apart within an iteration, so one's softmax overlaps another's MMAs.
    __syncthreads();
    load_kv(block + STAGES - 1);
    cp_async_commit_group();
    const u32 k_stage = sK + (block % STAGES) * KVTile::kBytes;
    const u32 v_stage = sV + (block % STAGES) * KVTile::kBytes;

    float s[MT][NT][4];  // (16*MT, BN) scores
    zero(s);
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      u32 a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[mt][kt][i];
        } else {
          ldmatrix_x4(a[mt], q_frag_addr(mt, kt));
        }
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        // Matrices: keys (np*16 + 0..7 | 8..15) x dims (kt*kStep + first | second chunk).
        const int mi = lane / 8;
        u32 b[4];
        ldmatrix_x4(b, k_stage + KVTile::offset(np * 16 + (mi / 2) * 8 + lane % 8, kt * kStep + (mi % 2) * kChunk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_qk<TIN>(s[mt][2 * np], a[mt], b[0], b[1]);
          mma_qk<TIN>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
    if (block >= blocks.first_masked) {
      apply_mask<MT, NT, CAUSAL>(s, m0 + warp_row0, block * BN, t.seq_k, t.causal_offset, lane);
    }
    softmax.update(s, o);

#pragma unroll
    for (int pk = 0; pk < PT; ++pk) {
      u32 a[MT][4];  // P as A fragments
      if constexpr (kFp8) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) to_operand_a_k32<e4m3>(s, mt, pk, a[mt]);
#pragma unroll
        for (int dp = 0; dp < DT / 2; ++dp) {
          // Matrices: keys pk*32 + (0..7 | 8..15 | 16..23 | 24..31) x byte
          // pairs of dims dp*16..dp*16+15, transposed: register i holds keys
          // 2q, 2q+1 of matrix i at dims 2g, 2g+1 (g = lane / 4, q = lane % 4).
          u32 b[4];
          ldmatrix_x4_trans(b, v_stage + KVTile::offset(pk * 32 + (lane / 8) * 8 + lane % 8, dp * 16));
          // Keys {2q, 2q+1, 8+2q, 9+2q} (and 16 on) of dim 2g, and of dim 2g+1.
          const u32 even0 = byte_perm<0x6420>(b[0], b[1]), odd0 = byte_perm<0x7531>(b[0], b[1]);
          const u32 even1 = byte_perm<0x6420>(b[2], b[3]), odd1 = byte_perm<0x7531>(b[2], b[3]);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_m16n8k32<e4m3>(o[mt][2 * dp], a[mt], even0, even1);
            mma_m16n8k32<e4m3>(o[mt][2 * dp + 1], a[mt], odd0, odd1);
          }
        }
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) to_operand_a<T>(s, mt, pk, a[mt]);
#pragma unroll
        for (int dp = 0; dp < DT / 2; ++dp) {
          // Matrices: keys (pk*16 + 0..7 | 8..15) x dims (dp*16 + 0..7 | 8..15), transposed.
          const int mi = lane / 8;
          u32 b[4];
          ldmatrix_x4_trans(b, v_stage + KVTile::offset(pk * 16 + (mi % 2) * 8 + lane % 8, dp * 16 + (mi / 2) * 8));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_m16n8k16<T>(o[mt][2 * dp], a[mt], b[0], b[1]);
            mma_m16n8k16<T>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
  }
  cp_async_wait_group<0>();
  // FP8: the output tile in T is twice Q's and spans K's space, which other
  // warps may still be reading.
  if constexpr (kFp8) __syncthreads();

  char* o_tile = static_cast<char*>(p.o) +
                 (batch * p.o_stride[0] + head * p.o_stride[1] + i64(t.q_row + m0) * p.o_stride[2]) * kElementBytes;
  float* lse_tile = p.lse ? p.lse + (i64(batch) * p.heads_q + head) * p.seq_q + t.q_row + m0 : nullptr;
  write_output<T, BM, D, MT, NT, DT, kFp8>(o, softmax, out_scale, sQ, o_tile, p.o_stride[2], lse_tile, rows_valid,
                                           warp_row0, lane);
}

}  // namespace cujit::portable
