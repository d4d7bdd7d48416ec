// The chunked Gated DeltaNet form's host side (kernels/linear_attention/gated_deltanet_chunked.h),
// which needs the CUDA build but no GPU: the shapes it takes, its workspace size, and a step whose
// workspace is short refused before anything is launched.
#include <gtest/gtest.h>

#include "kernels/linear_attention/gated_deltanet_chunked.h"

namespace nibble::kernels {
namespace {

GatedDeltaNetShape shape(int k_heads, int v_heads, int k_dim, int v_dim, int conv = 4) {
  GatedDeltaNetShape s;
  s.heads = {k_heads, v_heads, k_dim, v_dim};
  s.conv_kernel = conv;
  return s;
}

TEST(GatedDeltaNetChunkedPlan, SupportedShapes) {
  EXPECT_TRUE(gated_deltanet_chunked_supported(shape(16, 32, 128, 128)));  // Qwen3-Next-80B
  EXPECT_TRUE(gated_deltanet_chunked_supported(shape(1, 1, 64, 64)));
  EXPECT_TRUE(gated_deltanet_chunked_supported(shape(2, 4, 128, 64, 2)));
  EXPECT_FALSE(gated_deltanet_chunked_supported(shape(2, 4, 32, 32)));       // no 32 tiles
  EXPECT_FALSE(gated_deltanet_chunked_supported(shape(2, 4, 96, 128)));      // k_dim 96
  EXPECT_FALSE(gated_deltanet_chunked_supported(shape(1, 4, 128, 128)));     // group * v_dim 512
  EXPECT_FALSE(gated_deltanet_chunked_supported(shape(2, 3, 128, 128)));     // 3 % 2
  EXPECT_FALSE(gated_deltanet_chunked_supported(shape(2, 4, 128, 128, 9)));  // conv 9
}

TEST(GatedDeltaNetChunkedPlan, WorkspaceBytes) {
  const GatedDeltaNetShape s = shape(16, 32, 128, 128);
  // q, k: 8192 x 2048 BF16 each; v/U and W: 8192 x 32 x 128 BF16 each; g, beta: 8192 x 32 FP32.
  EXPECT_EQ(gated_deltanet_chunked_workspace_bytes(s, 8192),
            2u * 8192 * 2048 * 2 + 2u * 8192 * 4096 * 2 + 2u * 8192 * 32 * 4);
  EXPECT_EQ(gated_deltanet_chunked_workspace_bytes(s, 0), 0u);
  EXPECT_LT(gated_deltanet_chunked_workspace_bytes(s, 63),
            gated_deltanet_chunked_workspace_bytes(s, 64));
  EXPECT_EQ(gated_deltanet_chunked_workspace_bytes(shape(2, 4, 32, 32), 64), 0u);
}

TEST(GatedDeltaNetChunkedPlan, ShortWorkspaceRefusedBeforeAnyLaunch) {
  const GatedDeltaNetShape s = shape(2, 4, 128, 128);
  // Addresses never dereferenced: the step must be refused on the host.
  auto* fake = reinterpret_cast<std::uint16_t*>(std::uintptr_t(256));
  auto* fake_f = reinterpret_cast<float*>(std::uintptr_t(256));
  const GatedDeltaNetStepRows rows{reinterpret_cast<const GatedDeltaNetRow*>(fake), 1, 100, 100};
  const GatedDeltaNetDeviceParams params{fake, fake_f, fake_f, fake_f, 1e-6f};
  const std::size_t need = gated_deltanet_chunked_workspace_bytes(s, 100);
  EXPECT_EQ(gated_deltanet_mix_step(s, rows, fake, fake, params, {fake_f, fake_f}, {fake, need - 1},
                                    fake, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(gated_deltanet_mix_step(s, rows, fake, fake, params, {fake_f, fake_f}, {nullptr, need},
                                    fake, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace nibble::kernels
