// Thread-block cluster PTX wrappers (sm_90 and later): the CTA's rank in its
// cluster, the cluster-wide barrier (whole, or its arrive and wait apart),
// loads from another CTA's shared memory (distributed shared memory), and
// stores into it that complete on the receiver's mbarrier. Shared addresses
// are 32-bit: a CTA's own address, mapped to the same offset in rank r's
// shared memory by mapa.
#pragma once
#include "common/types.cuh"

namespace cujit {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ u32 cluster_ctarank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every CTA in the cluster: writes before it (shared memory
// included) are visible to reads after it, in any CTA of the cluster. The
// release is a GPU-wide memory barrier (MEMBAR.ALL.GPU) on sm_90a.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The barrier in two halves, so that work goes between them (each thread
// alternates the two), for a barrier whose only message is "this CTA is done
// reading its own shared memory": another CTA may now write it, or this one
// may leave. Reads that returned their values need no fence, so the arrive
// has no release, which cost the split decode ~0.45 us a barrier
// (docs/perf-log.md, "decode v14"); writes that another CTA reads take
// cluster_sync.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ u32 mapa_shared_cluster(u32 addr, u32 rank) {
  u32 mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(addr), "r"(rank));
  return mapped;
}
__device__ __forceinline__ float ld_shared_cluster_f32(u32 addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void ld_shared_cluster_v4_f32(float (&v)[4], u32 addr) {
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(addr)
               : "memory");
}
// Stores into a CTA's shared memory through its cluster address (another
// CTA's, or this one's) that complete their bytes on the mbarrier at `bar`,
// a cluster address in the same CTA as `addr`. The receiver waits on its own
// barrier (sm90::mbarrier_wait_cluster) for the bytes it expects: no cluster
// barrier, and so no release, between the stores and its reads.
__device__ __forceinline__ void st_async_f32(u32 addr, float v, u32 bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(addr), "f"(v),
               "r"(bar)
               : "memory");
}
__device__ __forceinline__ void st_async_v4_f32(u32 addr, float a, float b, float c, float d, u32 bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   addr),
               "f"(a), "f"(b), "f"(c), "f"(d), "r"(bar)
               : "memory");
}
#endif

}  // namespace cujit
