// Synchronization of the sm90 kernel's warpgroups: mbarriers typed by use,
// their slots taken from the shared-memory layout; the named barrier ids,
// from one enum; and the ping-pong turn between consumer warpgroups.
#pragma once
#include "attention/sm90/smem_layout.h"
#include "common/ptx_sm90.cuh"

namespace cujit::sm90 {

// One mbarrier: its shared-memory address.
struct Mbarrier {
  u32 addr;

  __device__ __forceinline__ void init(u32 arrivals) const { mbarrier_init(addr, arrivals); }
  __device__ __forceinline__ void wait(u32 parity) const { mbarrier_wait(addr, parity); }
  // The producer's arrival, announcing the bytes its TMA loads will bring.
  __device__ __forceinline__ void arrive_expect_tx(u32 bytes) const { mbarrier_arrive_expect_tx(addr, bytes); }
  // A consumer warp's release: one arrival per warp, once all its lanes are done.
  __device__ __forceinline__ void release_by_warp(int lane) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(addr);
  }
};

// The full/empty pairs of the Q buffers and of the K/V ring, at the slots
// SmemLayout gives them. "Full" completes on the producer's arrival and its
// TMA bytes; "empty" on one arrival per consumer warp. With FP8 inputs the
// transposer's warps take V (releasing v_empty) and fill the transposed ring
// (vt_full, one arrival per warp), which the consumers read and release
// (vt_empty); with V staged transposed (Traits::kVtStaged) the producer
// fills that ring by TMA as it fills K's, and the V ring goes unused.
template <class Traits>
struct SharedBarriers {
  u32 bars;  // the first barrier's address

  __device__ __forceinline__ Mbarrier q_full(int b) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.q_full_slot(b)};
  }
  __device__ __forceinline__ Mbarrier q_empty(int b) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.q_empty_slot(b)};
  }
  __device__ __forceinline__ Mbarrier k_full(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.k_full_slot(s)};
  }
  __device__ __forceinline__ Mbarrier k_empty(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.k_empty_slot(s)};
  }
  __device__ __forceinline__ Mbarrier v_full(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.v_full_slot(s)};
  }
  __device__ __forceinline__ Mbarrier v_empty(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.v_empty_slot(s)};
  }
  __device__ __forceinline__ Mbarrier vt_full(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.vt_full_slot(s)};
  }
  __device__ __forceinline__ Mbarrier vt_empty(int s) const {
    constexpr SmemLayout L = Traits::layout();
    return {bars + L.vt_empty_slot(s)};
  }
  // What P V waits for and releases: V's stage, or its transposed copy.
  __device__ __forceinline__ Mbarrier pv_full(int s) const { return Traits::kFp8 ? vt_full(s) : v_full(s); }
  __device__ __forceinline__ Mbarrier pv_empty(int s) const { return Traits::kFp8 ? vt_empty(s) : v_empty(s); }

  // By one thread, before the CTA's first __syncthreads.
  __device__ __forceinline__ void init() const {
    constexpr SmemLayout L = Traits::layout();
#pragma unroll
    for (int b = 0; b < L.q_buffers; ++b) {
      q_full(b).init(1);
      q_empty(b).init(Traits::kReleases);
    }
#pragma unroll
    for (int s = 0; s < Traits::STAGES; ++s) {
      k_full(s).init(Traits::kKvFills);
      k_empty(s).init(Traits::kReleases);
      v_full(s).init(Traits::kKvFills);
      if constexpr (Traits::kFp8) {
        v_empty(s).init(Traits::kTransposerWarps);
        vt_full(s).init(Traits::kVtStaged ? 1 : Traits::kTransposerWarps);  // staged: the producer's TMA
        vt_empty(s).init(Traits::kReleases);
      } else {
        v_empty(s).init(Traits::kReleases);
      }
    }
    fence_mbarrier_init();
  }
};

// Named barrier ids (bar.sync, bar.arrive); 0 is __syncthreads.
enum class NamedBarrier : int {
  warpgroup,  // 1 + w: consumer warpgroup w's own 128 threads
  scheduler,  // 1 + consumers + w: warpgroup w's ping-pong turn
};
template <int CONSUMERS>
__device__ __forceinline__ constexpr int named_barrier_id(NamedBarrier kind, int wg) {
  return 1 + (kind == NamedBarrier::scheduler ? CONSUMERS : 0) + wg;
}

// Ping-pong: a token passes around the consumer warpgroups; only its holder
// issues GEMMs. Barrier `scheduler + w` is warpgroup w's turn: the previous
// holder arrives on it, w waits on it. A lone consumer warpgroup has no one
// to take turns with (the SM's other CTA interleaves with it unscheduled).
template <int CONSUMERS>
struct PingPong {
  int wg;

  // Warpgroup 0 holds the token first.
  __device__ __forceinline__ void start() const {
    if (CONSUMERS > 1 && wg == CONSUMERS - 1) named_barrier_arrive(named_barrier_id<CONSUMERS>(NamedBarrier::scheduler, 0), 256);
  }
  __device__ __forceinline__ void wait() const {
    if constexpr (CONSUMERS > 1) named_barrier_sync(named_barrier_id<CONSUMERS>(NamedBarrier::scheduler, wg), 256);
  }
  __device__ __forceinline__ void pass() const {
    if constexpr (CONSUMERS > 1) {
      named_barrier_arrive(named_barrier_id<CONSUMERS>(NamedBarrier::scheduler, (wg + 1) % CONSUMERS), 256);
    }
  }
};

// Consumer warpgroup wg's own sync (its 128 threads).
template <int CONSUMERS>
__device__ __forceinline__ void warpgroup_sync(int wg) {
  named_barrier_sync(named_barrier_id<CONSUMERS>(NamedBarrier::warpgroup, wg), 128);
}

// Position in a ring of buffers, from a running counter that both sides keep:
// buffer i % N, phase parity (i / N) & 1. The producer waits on "empty" with
// the opposite parity, which passes at once on a fresh barrier.
template <int N>
struct RingSlot {
  int index;
  u32 phase;
  __device__ __forceinline__ static RingSlot at(int i) { return {i % N, u32((i / N) & 1)}; }
};

}  // namespace cujit::sm90
