// Tests for jit/device: the NVRTC target of a compute capability, the
// per-arch limits used offline, and GPU detection. No GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "jit/device.h"
#include "jit/error.h"
#include "jit/kernel_family.h"

namespace {

template <class Fn>
jit::Error expect_error(jit::ErrorCode code, Fn&& fn) {
  try {
    fn();
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e;
  }
  ADD_FAILURE() << "expected jit::Error(" << jit::to_string(code) << "), nothing was thrown";
  return jit::Error(jit::ErrorCode::Internal, "nothing thrown");
}

}  // namespace

TEST(ArchForCc, MapsComputeCapabilityToNvrtcTarget) {
  EXPECT_EQ(jit::detail::arch_for_cc(9, 0), "sm_90a");  // wgmma/setmaxnreg need the arch-specific target
  EXPECT_EQ(jit::detail::arch_for_cc(8, 9), "sm_89");
  EXPECT_EQ(jit::detail::arch_for_cc(8, 0), "sm_80");
  EXPECT_EQ(jit::detail::arch_for_cc(8, 6), "sm_86");
  EXPECT_EQ(jit::detail::arch_for_cc(10, 0), "sm_100");
}

TEST(ArchForCc, RejectsPreAmpere) {
  const jit::Error e = expect_error(jit::ErrorCode::Unsupported, [] { jit::detail::arch_for_cc(7, 5); });
  EXPECT_NE(std::string(e.what()).find("7.5"), std::string::npos) << e.what();
  expect_error(jit::ErrorCode::Unsupported, [] { jit::detail::arch_for_cc(6, 1); });
}

TEST(OfflineTarget, PublishedSharedMemoryLimits) {
  const jit::Target h100 = jit::offline_target("sm_90a");
  EXPECT_EQ(h100.arch, "sm_90a");
  EXPECT_EQ(h100.cc, 90);
  EXPECT_EQ(h100.max_smem_per_block, 232448);
  EXPECT_EQ(h100.sm_count, 0);  // offline: no device
  EXPECT_EQ(h100.device_name, "");

  const jit::Target ada = jit::offline_target("sm_89");
  EXPECT_EQ(ada.cc, 89);
  EXPECT_EQ(ada.max_smem_per_block, 101376);

  const jit::Target a100 = jit::offline_target("sm_80");
  EXPECT_EQ(a100.cc, 80);
  EXPECT_EQ(a100.max_smem_per_block, 166912);
}

TEST(OfflineTarget, UnknownArchListsKnownOnes) {
  for (const char* arch : {"sm_75", "sm_9", "", "SM_90A", "compute_90"}) {
    const jit::Error e = expect_error(jit::ErrorCode::InvalidArgument, [&] { jit::offline_target(arch); });
    const std::string message = e.what();
    EXPECT_NE(message.find(std::string("'") + arch + "'"), std::string::npos) << message;
    for (const char* known : {"sm_80", "sm_89", "sm_90a"}) {
      EXPECT_NE(message.find(known), std::string::npos) << message << " lacks " << known;
    }
  }
}

TEST(GpuPresent, FalseWithoutAGpu) {
  const bool present = jit::gpu_present();  // never throws
  if (present) GTEST_SKIP() << "a GPU is present on this machine";
  EXPECT_FALSE(present);
  // kernel_family.h: current_target() throws Error(NoDevice) without a GPU.
  expect_error(jit::ErrorCode::NoDevice, [] { jit::current_target(); });
}
