// Division by a divisor fixed for a launch, as one wide multiply and a shift
// (the host finds the multiplier): a tile's coordinates come from its index
// by two such divisions, which as runtime integer divisions would be a long
// chain of dependent instructions at the start of every tile. Plain constexpr
// C++ for NVRTC and the host alike.
#pragma once
#include "common/host_device.h"

namespace cujit {

// Exact for every dividend below 2^31 (Granlund and Montgomery): with
// l = ceil(log2 d), shift = 31 + l and multiplier = ceil(2^shift / d), which
// fits 32 bits, the multiplier's rounding error e < d adds n * e / 2^shift
// < 1/d to n/d, too little to reach the next integer.
struct FastDivisor {
  unsigned divisor = 1;
  unsigned multiplier = 1u << 31;
  unsigned shift = 31;

  CUJIT_HOST_DEVICE constexpr unsigned quotient(unsigned n) const {
    return unsigned((static_cast<unsigned long long>(n) * multiplier) >> shift);
  }
  CUJIT_HOST_DEVICE constexpr unsigned remainder(unsigned n, unsigned quotient) const {
    return n - quotient * divisor;
  }
};

// d in [1, 2^31); 0, which no launch divides by, is taken as 1.
CUJIT_HOST_DEVICE constexpr FastDivisor make_fast_divisor(unsigned d) {
  if (d == 0) d = 1;
  unsigned l = 0;
  while ((1ull << l) < d) ++l;
  const unsigned long long power = 1ull << (31 + l);
  return {d, unsigned((power + d - 1) / d), 31 + l};
}

}  // namespace cujit
