// Element types and fixed-width integers for device code. Self-contained:
// kernels are compiled by NVRTC with no CUDA toolkit headers.
#pragma once

namespace cujit {

using u32 = unsigned int;
using i64 = long long;

// Storage types; arithmetic happens in fp32 registers. e4m3 is the FP8
// format with 4 exponent bits (bias 7), 3 mantissa bits and no infinity;
// e5m2 has 5 exponent bits (bias 15) and 2 mantissa bits: the upper byte of
// an f16, infinity and NaN included.
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
struct e4m3 { unsigned char bits; };
struct e5m2 { unsigned char bits; };

template <class T> struct is_f16 { static constexpr bool value = false; };
template <> struct is_f16<f16> { static constexpr bool value = true; };

// Bytes per stored element: where device code and shared-memory layouts get
// it from.
template <class T> struct element_traits { static constexpr int bytes = sizeof(T); };

template <class A, class B> struct same_type { static constexpr bool value = false; };
template <class A> struct same_type<A, A> { static constexpr bool value = true; };

template <bool C, class A, class B> struct select_type { using type = A; };
template <class A, class B> struct select_type<false, A, B> { using type = B; };

template <class T> struct is_fp8 { static constexpr bool value = same_type<T, e4m3>::value || same_type<T, e5m2>::value; };

}  // namespace cujit
