// Element types and fixed-width integers for device code. Self-contained:
// kernels are compiled by NVRTC with no CUDA toolkit headers.
#pragma once

namespace cujit {

using u32 = unsigned int;
using i64 = long long;

// 16-bit storage types; arithmetic happens in fp32 registers.
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };

template <class T> struct is_f16 { static constexpr bool value = false; };
template <> struct is_f16<f16> { static constexpr bool value = true; };

// Bytes per stored element: where device code and shared-memory layouts get
// it from (1 for the FP8 types to come).
template <class T> struct element_traits { static constexpr int bytes = sizeof(T); };

template <class A, class B> struct same_type { static constexpr bool value = false; };
template <class A> struct same_type<A, A> { static constexpr bool value = true; };

}  // namespace cujit
