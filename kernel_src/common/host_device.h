// CUJIT_HOST_DEVICE marks the constexpr helpers that the host and NVRTC both
// compile (shared-memory layout, fast division). No includes.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CUJIT_HOST_DEVICE __host__ __device__
#else
#define CUJIT_HOST_DEVICE
#endif
