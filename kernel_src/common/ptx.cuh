// Thin wrappers over the PTX instructions the kernels use; each is named
// after its instruction. Shared-memory addresses are 32-bit (.shared window).
#pragma once
#include "common/types.cuh"

namespace cujit {

__device__ __forceinline__ u32 smem_addr(const void* ptr) {
  u32 addr;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(ptr));
  return addr;
}

// 16-byte async copy global -> shared; src_bytes < 16 zero-fills the rest
// (0 reads nothing, so out-of-range rows become zeros).
__device__ __forceinline__ void cp_async_cg_16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 4-byte async copy global -> shared, through L1 (.cg takes 16 bytes only).
__device__ __forceinline__ void cp_async_ca_4(u32 dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// Every copy this thread issued, committed to a group or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// D(16x8, f32) += A(16x16, row) * B(16x8, col), A/B in T (f16 or bf16).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if constexpr (is_f16<T>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// D(16x8, f32) += A(16x32, row) * B(32x8, col), A/B in T = e4m3 (sm_89 and
// newer): each register holds four consecutive k of one row (A) or column (B).
template <class T>
__device__ __forceinline__ void mma_m16n8k32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  static_assert(same_type<T, e4m3>::value, "8-bit mma.sync is e4m3 here");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  static_assert(sizeof(T) == 0, "FP8 mma.sync needs sm_89 or newer");
#endif
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four fp32 values -> one register of four T = e4m3 (x0 in the lowest
// byte), rounded to nearest even and saturated to +-448 (sm_89 and newer).
template <class T>
__device__ __forceinline__ u32 cvt_rn_x4(float x0, float x1, float x2, float x3) {
  static_assert(same_type<T, e4m3>::value, "four to a register is e4m3 here");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  static_assert(sizeof(T) == 0, "e4m3 conversions need sm_89 or newer");
#endif
  u32 r;
  asm("{\n .reg .b16 lo, hi;\n cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      " cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n mov.b32 %0, {lo, hi};\n}\n"
      : "=r"(r)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return r;
}

// Two fp32 values -> one register of two T (lo in the low half).
template <class T>
__device__ __forceinline__ u32 cvt_rn_x2(float lo, float hi) {
  u32 r;
  if constexpr (is_f16<T>::value) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// Four FP8 values of format TKV (bytes 0..3 of x) -> two registers of two T,
// exactly: lo holds bytes 0 and 1, hi bytes 2 and 3 (the lower byte in the
// lower half). e4m3 converts to f16 in one instruction (sm_89 and newer);
// e5m2 is the upper byte of an f16, so a byte permute places it (any
// architecture). bf16 goes through fp32, as no instruction converts f16x2
// to bf16x2.
template <class TKV, class T>
__device__ __forceinline__ void cvt_fp8x4(u32 x, u32& lo, u32& hi) {
  static_assert(is_fp8<TKV>::value, "TKV is e4m3 or e5m2");
  if constexpr (same_type<TKV, e5m2>::value) {
    asm("prmt.b32 %0, %1, 0, 0x1404;\n" : "=r"(lo) : "r"(x));  // bytes {0, x0, 0, x1}
    asm("prmt.b32 %0, %1, 0, 0x3424;\n" : "=r"(hi) : "r"(x));  // bytes {0, x2, 0, x3}
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    static_assert(sizeof(T) == 0, "e4m3 conversions need sm_89 or newer");
#endif
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
  }
  if constexpr (!is_f16<T>::value) {
    auto to_bf16x2 = [](u32 h2) {
      u32 r;
      asm("{\n .reg .f16 a, b;\n .reg .f32 fa, fb;\n mov.b32 {a, b}, %1;\n cvt.f32.f16 fa, a;\n"
          " cvt.f32.f16 fb, b;\n cvt.rn.bf16x2.f32 %0, fb, fa;\n}\n"
          : "=r"(r)
          : "r"(h2));
      return r;
    };
    lo = to_bf16x2(lo);
    hi = to_bf16x2(hi);
  }
}

// Bytes of x rearranged by a prmt selector (byte i of the result is byte
// (selector >> 4 i) & 7 of x, zeros above 3).
template <u32 SELECTOR>
__device__ __forceinline__ u32 byte_perm(u32 x) {
  u32 r;
  asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(r) : "r"(x), "n"(SELECTOR));
  return r;
}

// Bytes of the pair {lo, hi} (bytes 0-3 of lo, 4-7 of hi) rearranged by a
// prmt selector.
template <u32 SELECTOR>
__device__ __forceinline__ u32 byte_perm(u32 lo, u32 hi) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(lo), "r"(hi), "n"(SELECTOR));
  return r;
}

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// 1 / x for x != 0 and 0 for x == 0, with no branch: the IEEE division's
// slow path (a call taken for some exponents) would make timing depend on
// data. rcp.approx is within 1 ulp, far below fp16/bf16 rounding.
__device__ __forceinline__ float rcp_approx_or_zero(float x) {
  float y;
  asm("{\n .reg .pred zero;\n rcp.approx.ftz.f32 %0, %1;\n setp.eq.f32 zero, %1, 0f00000000;\n"
      " selp.f32 %0, 0f00000000, %0, zero;\n}\n"
      : "=f"(y)
      : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void st_shared_b32(u32 addr, u32 v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_v2_b32(u32 addr, u32 a, u32 b) {
  asm volatile("st.shared.v2.b32 [%0], {%1,%2};\n" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void ld_shared_v4_b32(u32 (&v)[4], u32 addr) {
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void st_global_v4_b32(void* ptr, const u32 (&v)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(ptr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}

__device__ __forceinline__ void st_global_v4_f32(void* ptr, const float (&v)[4]) {
  asm volatile("st.global.v4.f32 [%0], {%1,%2,%3,%4};\n" ::"l"(ptr), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
}
__device__ __forceinline__ void ld_global_v2_f32(float (&v)[2], const void* ptr) {
  asm volatile("ld.global.v2.f32 {%0,%1}, [%2];\n" : "=f"(v[0]), "=f"(v[1]) : "l"(ptr) : "memory");
}
__device__ __forceinline__ void ld_shared_v4_f32(float (&v)[4], u32 addr) {
  asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];\n" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void st_shared_v4_f32(u32 addr, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
__device__ __forceinline__ void ld_shared_v2_b32(u32& a, u32& b, u32 addr) {
  asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];\n" : "=r"(a), "=r"(b) : "r"(addr) : "memory");
}
__device__ __forceinline__ void ld_shared_v2_f32(float& a, float& b, u32 addr) {
  asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];\n" : "=f"(a), "=f"(b) : "r"(addr) : "memory");
}
__device__ __forceinline__ void st_shared_v2_f32(u32 addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1,%2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void st_shared_f32(u32 addr, float x) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ u32 ld_shared_b32(u32 addr) {
  u32 x;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x) : "r"(addr) : "memory");
  return x;
}
__device__ __forceinline__ float ld_shared_f32(u32 addr) {
  float x;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(x) : "r"(addr) : "memory");
  return x;
}
__device__ __forceinline__ void st_global_v2_b32(void* ptr, u32 a, u32 b) {
  asm volatile("st.global.v2.b32 [%0], {%1,%2};\n" ::"l"(ptr), "r"(a), "r"(b) : "memory");
}

// Brings the line holding `ptr` into L1, so that a later load of it does not
// wait for L2.
__device__ __forceinline__ void prefetch_l1(const void* ptr) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(ptr));
}

// Programmatic dependent launch (sm_90 and later; no-ops before, and when the
// launch did not ask for it). wait: block until the grids this one depends on
// have completed and their memory is visible. launch_dependents: let the next
// kernel in the stream start launching (it waits for this one in turn).
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace cujit
