// FP8 inputs for the benchmarks: one descale factor of 1 on the device, read
// for q, k and v alike (strides {0, 0}), so the stored e4m3 values are the
// values attended to.
#pragma once
#include <array>
#include <cstdint>

#include "jit/cujit.h"

// Movable: a moved DeviceBuffer keeps its device address, so `descales`
// stays valid.
struct UnitDescale {
  jit::DeviceBuffer factor;
  jit::Fp8Descale descales;  // points into `factor`

  UnitDescale() : factor(sizeof(float)) {
    const float one = 1.f;
    factor.upload(&one, sizeof one);
    const auto* f = static_cast<const float*>(factor.data());
    descales = {f, f, f, std::array<std::int64_t, 2>{0, 0}};
  }
};
