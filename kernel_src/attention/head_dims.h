// The head dims each attention family is instantiated for: one list that the
// kernels' static_asserts, the host's support checks, pruning, warm-up and
// error messages all read. Plain constexpr C++, so NVRTC and the host both
// take it.
#pragma once
#include "common/host_device.h"

namespace cujit {

struct HeadDims {
  int values[4];
  int count;
  CUJIT_HOST_DEVICE constexpr bool contains(int d) const {
    for (int i = 0; i < count; ++i) {
      if (values[i] == d) return true;
    }
    return false;
  }
};

// mma.sync, cp.async (sm_80 and newer).
constexpr HeadDims kPortableHeadDims{{64, 128}, 2};
// wgmma, TMA (sm_90a): up to 256, which needs the Hopper register split.
constexpr HeadDims kSm90HeadDims{{64, 128, 256}, 3};
// The split-KV decode kernel (mma.sync, cp.async; sm_80 and newer): its few
// query rows leave registers for D = 256, on sm_90 only (the decode family's
// pruning says why).
constexpr HeadDims kDecodeHeadDims{{64, 128, 256}, 3};

}  // namespace cujit
