// The FP8 KV cache format's host reference (kernels/attention/kv_fp8_ref.h), which the GPU store
// and attention kernels are checked against.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention/kv_fp8_ref.h"
#include "kernels/nvfp4/bf16.h"

namespace nibble::kernels {
namespace {

TEST(KvFp8Ref, ScaleIsAmaxOver448RoundedUpToBf16) {
  EXPECT_EQ(kv_fp8_scale(448.0f), 0x3f80);  // exactly 1.0
  EXPECT_EQ(kv_fp8_scale(0.0f), 0x3f80);    // an all-zero row keeps zeros
  for (const float amax : {1e-3f, 0.37f, 3.0f, 1000.0f, 6.1e4f}) {
    const float s = nvfp4::bf16_to_float(kv_fp8_scale(amax));
    EXPECT_GE(s, amax / 448.0f) << amax;  // never above E4M3's largest value
    EXPECT_LT(s, amax / 448.0f * (1.0f + 1.0f / 64)) << amax;
  }
}

TEST(KvFp8Ref, RowsRoundTripWithinE4M3Precision) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const float spread : {1e-2f, 1.0f, 50.0f}) {
    std::vector<float> row(128);
    for (auto& x : row) x = normal(rng) * spread;
    std::vector<std::uint8_t> codes(row.size());
    const std::uint16_t scale = quantize_kv_row(row, codes);
    float amax = 0.0f;
    for (float x : row) amax = std::max(amax, std::fabs(x));
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const float back = dequantize_kv(codes[i], scale);
      // E4M3 keeps 3 mantissa bits: half an ulp is 1/16 relative for normal values, and values
      // far below amax fall into subnormals whose step is 2^-9 of the scale.
      EXPECT_LE(std::fabs(back - row[i]),
                std::max(std::fabs(row[i]) / 16, std::ldexp(nvfp4::bf16_to_float(scale), -10)))
          << i;
      EXPECT_EQ(std::signbit(back) && back != 0.0f, row[i] < 0 && back != 0.0f);
      err += double(back - row[i]) * (back - row[i]);
      ref += double(row[i]) * row[i];
    }
    EXPECT_LT(std::sqrt(err / ref), 0.04) << spread;  // ~2^-5 relative RMS for Gaussian rows
    EXPECT_LE(dequantize_kv(codes[0], scale), amax * (1 + 1.0f / 16));
  }
}

TEST(KvFp8Ref, ZeroRowStaysZeroAndSizesMustMatch) {
  std::vector<float> row(64, 0.0f);
  std::vector<std::uint8_t> codes(64, 0xff);
  EXPECT_EQ(quantize_kv_row(row, codes), 0x3f80);
  for (auto c : codes) EXPECT_EQ(dequantize_kv(c, 0x3f80), 0.0f);
  std::vector<std::uint8_t> short_codes(10);
  EXPECT_THROW((void)quantize_kv_row(row, short_codes), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::kernels
