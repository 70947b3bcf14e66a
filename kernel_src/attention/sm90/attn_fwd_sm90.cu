// Hopper flash-attention forward (FlashAttention-3 structure) for sm_90a.
//
// One persistent CTA per SM (two with BM = 64) walks a static list of
// (batch, head, m-block) tiles. Warpgroup 0 is the producer: one thread
// issues TMA loads of Q and of K/V blocks into a STAGES-deep ring, each
// completing on an mbarrier with a transaction count. Warpgroups 1..BM/64
// are consumers, each owning 64 query rows: S = Q K^T on wgmma with both
// operands in shared memory, online softmax in registers, O += P V on wgmma
// with P from registers. The epilogue stages O in shared memory and writes
// it with a TMA store.
#include "attention/common/mask.cuh"
#include "attention/common/online_softmax.cuh"
#include "attention/sm90/attn_params_sm90.h"
#include "attention/sm90/smem_layout.h"
#include "attention/sm90/wgmma_ops.cuh"
#include "common/ptx_sm90.cuh"

namespace cujit::sm90 {

// Registers per thread after reallocation (smem_layout.h), checked against
// the register file: 128 * producer + 128 * consumers * consumer <= 65536 /
// CTAs per SM.
template <int CONSUMERS>
struct RegisterSplit {
  static constexpr int kProducer = producer_registers(64 * CONSUMERS);
  static constexpr int kConsumer = consumer_registers(64 * CONSUMERS);
  static_assert(128 * kProducer + 128 * CONSUMERS * kConsumer <= 65536 / ctas_per_sm(64 * CONSUMERS),
                "register file overcommitted");
};

struct Tile {
  int m_block, head, batch;
};

// The tile at a position of the CTAs' walk: with tiles_by_rows, one m-block
// of every (batch, head) after another, else the m-blocks of one (batch,
// head) together, sharing its K/V in L2 (jit/sm90_tile_order.h says when the
// host picks which). Causal tiles run longest (last m-block) first.
template <bool CAUSAL>
__device__ __forceinline__ Tile tile_at(int index, const Sm90AttnParams& p) {
  const unsigned major = p.tile_divisor.quotient(index);
  const unsigned minor = p.tile_divisor.remainder(index, major);
  const unsigned bh = p.tiles_by_rows ? minor : major;
  const int m = int(p.tiles_by_rows ? major : minor);
  const unsigned batch = p.head_divisor.quotient(bh);
  return {CAUSAL ? p.m_blocks - 1 - m : m, int(p.head_divisor.remainder(bh, batch)), int(batch)};
}

// The key blocks a tile of rows [m0, m0 + BM) needs, and from which block on
// they need a mask (the causal diagonal or the end of the keys).
struct KeyBlocks {
  int count, first_masked;
};
template <int BM, int BN, bool CAUSAL>
__device__ __forceinline__ KeyBlocks key_blocks(int m0, const AttnParams& a) {
  // Divisions of non-negative values, in unsigned arithmetic: a shift or a
  // multiply, without the predicated sign fix-up that signed division adds
  // (whose registers the SASS audit cannot tell apart from data).
  int n_end = a.seq_k;
  int first_masked = int(unsigned(a.seq_k) / BN);
  if constexpr (CAUSAL) {
    n_end = min(n_end, min(BM, a.seq_q - m0) + m0 + a.causal_offset);
    first_masked = min(first_masked, int(unsigned(max(0, m0 + a.causal_offset + 1)) / BN));
  }
  return {int((unsigned(max(n_end, 0)) + BN - 1) / BN), first_masked};
}

template <int D, int BM, int BN, int STAGES, class T, bool CAUSAL>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, ctas_per_sm(BM))
    attn_fwd_sm90(const __grid_constant__ Sm90AttnParams p) {
  static_assert(same_type<T, f16>::value || same_type<T, bf16>::value, "T is f16 or bf16");
  static_assert(D == 64 || D == 128 || D == 256, "D is 64, 128 or 256");
  static_assert(BM == 64 || BM == 128 || BM == 192, "one to three consumer warpgroups of 64 rows");
  static_assert(BN % 16 == 0 && BN <= 256, "BN is a multiple of 16 (the k-step of P V), at most 256");
  static_assert(STAGES >= 2, "the K/V ring needs at least two stages");
  constexpr int kConsumers = BM / 64;
  constexpr int kNT = BN / 8;   // 8-column accumulator tiles of S
  constexpr int kDT = D / 8;    // ... of O
  constexpr SmemLayout L(D, BM, BN, STAGES);
  static_assert(L.bytes <= smem_budget(BM), "tile does not fit in shared memory");
  constexpr bool kOInQ = L.o_in_q;
  // Whether a block's softmax can run while the warpgroup's P V of the block
  // before runs: S, that P V's operand P and its accumulator O are live at
  // once (fp32 S is BN / 2 registers, P BN / 4, O D / 2, plus ~40 for the
  // rest). Where they do not fit (three consumer warpgroups' 160 registers at
  // larger tiles) ptxas would spill or serialize the wgmma; there the P V
  // finishes first.
  constexpr bool kSoftmaxUnderPV = D / 2 + BN / 2 + BN / 4 + 40 <= consumer_registers(BM);

  extern __shared__ unsigned char smem_raw[];
  const u32 base = (smem_addr(smem_raw) + kSmemAlign - 1) & ~u32(kSmemAlign - 1);
  const u32 sQ = base + L.q;
  const u32 sK = base + L.k;
  const u32 sV = base + L.v;
  const u32 sO = base + L.o;
  constexpr int kQBuffers = L.q_buffers;
  const u32 bars = base + L.barriers;
  auto q_full = [&](int b) { return bars + 8 * b; };
  auto q_empty = [&](int b) { return bars + 16 + 8 * b; };
  auto k_full = [&](int s) { return bars + 32 + 8 * s; };
  auto k_empty = [&](int s) { return bars + 32 + 8 * (STAGES + s); };
  auto v_full = [&](int s) { return bars + 32 + 8 * (2 * STAGES + s); };
  auto v_empty = [&](int s) { return bars + 32 + 8 * (3 * STAGES + s); };
  // Consumers release a buffer once per warp.
  constexpr u32 kReleases = kConsumers * 4;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int b = 0; b < kQBuffers; ++b) {
      mbarrier_init(q_full(b), 1);
      mbarrier_init(q_empty(b), kReleases);
    }
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(k_full(s), 1);
      mbarrier_init(k_empty(s), kReleases);
      mbarrier_init(v_full(s), 1);
      mbarrier_init(v_empty(s), kReleases);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  const AttnParams& a = p.attn;
  // Through a shuffle, so that the compiler knows it is the same on every
  // lane of a warp: from threadIdx.x alone it cannot, and it guards the
  // .aligned instructions (wgmma, setmaxnreg, named barriers) that follow a
  // branch on it with code for warps that might have diverged.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  // The CTA's tile in round r: rounds of gridDim.x consecutive tiles, dealt
  // in alternating directions. With causal tiles of a head running longest
  // to shortest, one direction alone would hand some CTAs the long end of
  // every round; alternating evens out what each CTA gets.
  auto tile_index = [&](int r) {
    return r * int(gridDim.x) + (r % 2 == 0 ? int(blockIdx.x) : int(gridDim.x - 1 - blockIdx.x));
  };

  if (warpgroup == 0) {
    // ---------------------------------------------------------- producer
    setmaxnreg_dec<RegisterSplit<kConsumers>::kProducer>();
    if (threadIdx.x != 0) return;
    prefetch_tensor_map(&p.q);
    prefetch_tensor_map(&p.k);
    prefetch_tensor_map(&p.v);
    int kv_iter = 0;
    for (int tile_iter = 0, index; (index = tile_index(tile_iter)) < p.total_tiles; ++tile_iter) {
      const Tile t = tile_at<CAUSAL>(index, p);
      const int qb = tile_iter % kQBuffers;
      const int m0 = t.m_block * BM;
      const int head_kv = t.head / a.group;
      const KeyBlocks blocks = key_blocks<BM, BN, CAUSAL>(m0, a);

      mbarrier_wait(q_empty(qb), ((tile_iter / kQBuffers) & 1) ^ 1);
      mbarrier_arrive_expect_tx(q_full(qb), L.q_bytes);
#pragma unroll
      for (int c = 0; c < L.chunks; ++c)
#pragma unroll
        for (int w = 0; w < kConsumers; ++w)
          tma_load_4d(sQ + qb * L.q_bytes + (c * BM + w * 64) * kRowBytes, &p.q, q_full(qb), c * 64, m0 + w * 64,
                      t.head, t.batch);

      // Key blocks go last to first: the masked ones come first.
      for (int n = blocks.count - 1; n >= 0; --n, ++kv_iter) {
        const int stage = kv_iter % STAGES;
        const u32 phase = (kv_iter / STAGES) & 1;
        mbarrier_wait(k_empty(stage), phase ^ 1);
        mbarrier_arrive_expect_tx(k_full(stage), L.kv_bytes);
#pragma unroll
        for (int c = 0; c < L.chunks; ++c)
          tma_load_4d(sK + stage * L.kv_bytes + c * BN * kRowBytes, &p.k, k_full(stage), c * 64, n * BN, head_kv,
                      t.batch);
        mbarrier_wait(v_empty(stage), phase ^ 1);
        mbarrier_arrive_expect_tx(v_full(stage), L.kv_bytes);
#pragma unroll
        for (int c = 0; c < L.chunks; ++c)
          tma_load_4d(sV + stage * L.kv_bytes + c * BN * kRowBytes, &p.v, v_full(stage), c * 64, n * BN, head_kv,
                      t.batch);
      }
    }
    return;
  }

  // ------------------------------------------------------------ consumers
  setmaxnreg_inc<RegisterSplit<kConsumers>::kConsumer>();
  const int wg = warpgroup - 1;
  const int thread = threadIdx.x % 128;
  const int warp = thread / 32;
  const int lane = thread % 32;
  const u32 sO_wg = sO + wg * 64 * kRowBytes;
  auto release = [&](u32 bar) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bar);
  };

  // S = Q K^T: D/16 k-steps, 32 bytes apart inside a 128-byte row, then on
  // to the next 64-column chunk.
  auto issue_qk = [&](float (&s)[1][kNT][4], u32 sQ_wg, int stage) {
#pragma unroll
    for (int kt = 0; kt < D / 16; ++kt) {
      const u32 k_offset = (kt % 4) * 32;
      const u64 desc_q = smem_descriptor_sw128(sQ_wg + (kt / 4) * BM * kRowBytes + k_offset, 16, 1024);
      const u64 desc_k =
          smem_descriptor_sw128(sK + stage * L.kv_bytes + (kt / 4) * BN * kRowBytes + k_offset, 16, 1024);
      Wgmma<BN, T>::ss(s[0], desc_q, desc_k, kt > 0 ? 1 : 0);
    }
  };
  // O += P V: V is MN-major (head dim contiguous); 16 keys per k-step are 16
  // rows of every chunk, chunks BN rows apart.
  auto issue_pv = [&](float (&o)[1][kDT][4], const u32 (&pa)[BN / 16][4], int stage) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u64 desc_v = smem_descriptor_sw128(sV + stage * L.kv_bytes + kk * 16 * kRowBytes, BN * kRowBytes, 1024);
      Wgmma<D, T>::rs(o[0], pa[kk], desc_v, 1);
    }
  };
  // P as wgmma A fragments: the accumulator layout of two 8-column tiles.
  auto to_operand_a = [](const float (&s)[1][kNT][4], u32 (&pa)[BN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = cvt_rn_x2<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pa[kk][1] = cvt_rn_x2<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pa[kk][2] = cvt_rn_x2<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pa[kk][3] = cvt_rn_x2<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
  };
  // Ping-pong: a token passes around the consumer warpgroups; only its
  // holder issues GEMMs. Named barrier kSchedulerBarrier + w is warpgroup w's
  // turn: the previous holder arrives on it, w waits on it. A lone consumer
  // warpgroup has no one to take turns with (the SM's other CTA interleaves
  // with it unscheduled).
  constexpr int kSchedulerBarrier = 1 + kConsumers;
  auto scheduler_wait = [&] {
    if constexpr (kConsumers > 1) named_barrier_sync(kSchedulerBarrier + wg, 256);
  };
  auto scheduler_pass = [&] {
    if constexpr (kConsumers > 1) named_barrier_arrive(kSchedulerBarrier + (wg + 1) % kConsumers, 256);
  };
  if (kConsumers > 1 && wg == kConsumers - 1) named_barrier_arrive(kSchedulerBarrier, 256);  // warpgroup 0 starts

  // Q's space is free for the next tile once the last S = Q K^T is done,
  // unless O is staged there (then after the epilogue's store).
  int qb = 0;  // this tile's Q buffer
  auto release_q = [&] {
    if constexpr (!kOInQ) release(q_empty(qb));
  };

  int kv_iter = 0;
  for (int tile_iter = 0, index; (index = tile_index(tile_iter)) < p.total_tiles; ++tile_iter) {
    const Tile t = tile_at<CAUSAL>(index, p);
    qb = tile_iter % kQBuffers;
    const u32 sQ_wg = sQ + qb * L.q_bytes + wg * 64 * kRowBytes;  // this warpgroup's 64 rows of chunk 0
    const int m0 = t.m_block * BM;
    const int m_wg = m0 + wg * 64;
    const KeyBlocks blocks = key_blocks<BM, BN, CAUSAL>(m0, a);

    float o[1][kDT][4];
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
    OnlineSoftmax<1, kNT, kDT> softmax(a.scale_log2);

    mbarrier_wait(q_full(qb), (tile_iter / kQBuffers) & 1);
    if (blocks.count > 0) {
      // Key blocks go last to first, as the producer loads them. Each step
      // issues S = Q K^T for the next block and O += P V for this one, then
      // does the next block's softmax while P V runs. Warpgroups take turns
      // issuing (ping-pong), so one's softmax also hides under another's GEMMs.
      int n = blocks.count - 1;
      int stage = kv_iter % STAGES;
      u32 phase = (kv_iter / STAGES) & 1;
      float s[1][kNT][4];
      float correction[1][2];
      mbarrier_wait(k_full(stage), phase);
      scheduler_wait();
      fence_accumulators(s[0]);
      wgmma_fence();
      issue_qk(s, sQ_wg, stage);
      wgmma_commit_group();
      scheduler_pass();
      wgmma_wait_group<0>();
      fence_accumulators(s[0]);
      release(k_empty(stage));
      if (n == 0) release_q();
      if (n >= blocks.first_masked) apply_mask<1, kNT, CAUSAL>(s, m_wg + warp * 16, n * BN, a.seq_k, a.causal_offset, lane);
      softmax.update_scores(s, correction);  // O is still zero: no rescale
      u32 pa[BN / 16][4];
      to_operand_a(s, pa);

      for (--n; n >= 0; --n) {
        const int next_stage = (kv_iter + 1) % STAGES;
        const u32 next_phase = ((kv_iter + 1) / STAGES) & 1;
        mbarrier_wait(k_full(next_stage), next_phase);
        mbarrier_wait(v_full(stage), phase);
        scheduler_wait();
        fence_accumulators(s[0]);
        fence_accumulators(o[0]);
        wgmma_fence();
        issue_qk(s, sQ_wg, next_stage);
        wgmma_commit_group();
        issue_pv(o, pa, stage);
        wgmma_commit_group();
        scheduler_pass();
        wgmma_wait_group<1>();  // S is ready; P V may still run
        fence_accumulators(s[0]);
        release(k_empty(next_stage));
        if (n == 0) release_q();
        if constexpr (kSoftmaxUnderPV) {
          // The softmax sits in both arms of the mask's branch, so that the
          // wait for P V below starts a block of its own: in one block with
          // the softmax, ptxas schedules that wait first and the softmax no
          // longer runs under P V. The fences keep the softmax before the wait
          // and the conversion of P (into registers the P V may still read)
          // after it.
          if (n >= blocks.first_masked) {
            apply_mask<1, kNT, CAUSAL>(s, m_wg + warp * 16, n * BN, a.seq_k, a.causal_offset, lane);
            softmax.update_scores(s, correction);
            fence_accumulators(s[0]);
          } else {
            softmax.update_scores(s, correction);
            fence_accumulators(s[0]);
          }
          wgmma_wait_group<0>();
          fence_accumulators(o[0]);
          fence_accumulators(s[0]);
        } else {
          if (n >= blocks.first_masked) apply_mask<1, kNT, CAUSAL>(s, m_wg + warp * 16, n * BN, a.seq_k, a.causal_offset, lane);
          softmax.update_scores(s, correction);
          wgmma_wait_group<0>();
          fence_accumulators(o[0]);
        }
        release(v_empty(stage));
        OnlineSoftmax<1, kNT, kDT>::rescale(o, correction);
        to_operand_a(s, pa);
        ++kv_iter;
        stage = next_stage;
        phase = next_phase;
      }

      mbarrier_wait(v_full(stage), phase);
      scheduler_wait();
      fence_accumulators(o[0]);
      wgmma_fence();
      issue_pv(o, pa, stage);
      wgmma_commit_group();
      scheduler_pass();
      wgmma_wait_group<0>();
      fence_accumulators(o[0]);
      release(v_empty(stage));
      ++kv_iter;
    }
    if (blocks.count == 0) release_q();

    // Epilogue: normalize, convert, stage in shared memory with the TMA's
    // 128-byte swizzle (16-byte unit u of row r lands at u ^ (r % 8)), store.
    if (thread == 0) bulk_wait_group_read_0();  // the last tile's store has read sO
    named_barrier_sync(1 + wg, 128);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax.total_sum(0, r);
      const float inv = softmax.normalizer(l);
      const int row = warp * 16 + lane / 4 + 8 * r;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        const u32 packed = cvt_rn_x2<T>(o[0][dt][2 * r] * inv, o[0][dt][2 * r + 1] * inv);
        const int chunk = dt / 8;
        const int unit = (dt % 8) ^ (row % 8);
        st_shared_b32(sO_wg + (chunk * BM + row) * kRowBytes + unit * 16 + (lane % 4) * 4, packed);
      }
      if (a.lse != nullptr && lane % 4 == 0 && m_wg + row < a.seq_q) {
        a.lse[(i64(t.batch) * a.heads_q + t.head) * a.seq_q + m_wg + row] =
            softmax.lse(0, r, l);
      }
    }
    fence_proxy_async_shared();
    named_barrier_sync(1 + wg, 128);
    if (thread == 0) {
#pragma unroll
      for (int c = 0; c < L.chunks; ++c)
        tma_store_4d(&p.o, sO_wg + c * BM * kRowBytes, c * 64, m_wg, t.head, t.batch);
      bulk_commit_group();
    }
    if constexpr (kOInQ) {
      // O was staged in Q's space: the next Q may load once the store has read it.
      if (thread == 0) bulk_wait_group_read_0();
      named_barrier_sync(1 + wg, 128);
      release(q_empty(qb));
    }
  }
  if (thread == 0) bulk_wait_group_0();
}

}  // namespace cujit::sm90
