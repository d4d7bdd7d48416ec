// The NVFP4 CPU reference against the format's full value tables and hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::nvfp4 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(E2M1, DecodesTheFullTable) {
  const float expected[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(e2m1_to_float(std::uint8_t(c)), expected[c]) << c;
    EXPECT_EQ(std::signbit(e2m1_to_float(std::uint8_t(c))), c >= 8) << c;
  }
}

TEST(E2M1, EveryCodeRoundTrips) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(float_to_e2m1(e2m1_to_float(std::uint8_t(c))), c);
}

TEST(E2M1, TiesGoToTheEvenCode) {
  // midpoint -> expected code (even one of the two neighbours)
  const std::pair<float, int> ties[] = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4},
                                        {2.5f, 4},  {3.5f, 6},  {5.0f, 6}};
  for (auto [x, code] : ties) {
    EXPECT_EQ(float_to_e2m1(x), code) << x;
    EXPECT_EQ(float_to_e2m1(-x), code | 0x8) << -x;
  }
  // Just off the midpoint goes to the nearer value.
  EXPECT_EQ(float_to_e2m1(std::nextafter(0.25f, 1.0f)), 1);
  EXPECT_EQ(float_to_e2m1(std::nextafter(5.0f, 10.0f)), 7);
  EXPECT_EQ(float_to_e2m1(std::nextafter(2.5f, 0.0f)), 4);
  // Every midpoint's neighbours: the float below rounds down, the float above up, so the codes
  // change exactly at the midpoints (between them the nearest magnitude cannot change).
  const float midpoints[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(float_to_e2m1(std::nextafter(midpoints[i], 0.0f)), i) << midpoints[i];
    EXPECT_EQ(float_to_e2m1(std::nextafter(midpoints[i], 8.0f)), i + 1) << midpoints[i];
    EXPECT_EQ(float_to_e2m1(-std::nextafter(midpoints[i], 8.0f)), (i + 1) | 0x8) << midpoints[i];
  }
}

TEST(E2M1, SaturatesAndHandlesSpecials) {
  EXPECT_EQ(float_to_e2m1(6.5f), 0x7);
  EXPECT_EQ(float_to_e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_e2m1(kInf), 0x7);
  EXPECT_EQ(float_to_e2m1(-kInf), 0xF);
  EXPECT_EQ(float_to_e2m1(std::nanf("")), 0x7);
  EXPECT_EQ(float_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(float_to_e2m1(-0.1f), 0x8);
  EXPECT_EQ(float_to_e2m1(1e-30f), 0x0);
}

TEST(E4M3, DecodesKnownCodes) {
  EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7.0f / 512);            // largest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x3C), 1.5f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(E4M3, TableIsMonotonicAndEveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(std::uint8_t(c))), c) << c;
    if ((c & 0x7F) > 0 && c < 0x7F) {
      EXPECT_GT(e4m3_to_float(std::uint8_t(c)), e4m3_to_float(std::uint8_t(c - 1)));
    }
  }
}

TEST(E4M3, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // halfway 1 (0x38) and 1.125 (0x39): even
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);  // halfway 1.125 (0x39) and 1.25 (0x3A): even
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal steps -> 2
  EXPECT_EQ(float_to_e4m3(440.0f), 0x7E);                 // 416..448 midpoint is 432
  EXPECT_EQ(float_to_e4m3(432.0f), 0x7E);                 // tie: 0x7D odd, 0x7E even
  EXPECT_EQ(float_to_e4m3(460.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(kInf), 0x7E);
  EXPECT_EQ(float_to_e4m3(-kInf), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7F);
}

TEST(Packing, LowNibbleIsTheEvenElement) {
  // Row [0.5, -6, then zeros] with global 1 and block amax 6 -> block scale 1.0 (0x38).
  std::vector<float> row(16, 0.0f);
  row[0] = 0.5f;
  row[1] = -6.0f;
  std::vector<std::uint8_t> packed(8), scales(1);
  quantize_row(row, 1.0f, packed, scales);
  EXPECT_EQ(scales[0], 0x38);
  EXPECT_EQ(packed[0], 0xF1);  // low nibble 0x1 (0.5), high nibble 0xF (-6)
  std::vector<float> back(16);
  dequantize_row(packed, scales, 1.0f, back);
  EXPECT_EQ(back[0], 0.5f);
  EXPECT_EQ(back[1], -6.0f);
}

TEST(Quantize, HandComputedBlockAndGlobalScales) {
  // amax 2688 -> global = 2688 / 2688 = 1; block amax 12 -> scale 12/6/1 = 2 (0x40).
  std::vector<float> w(32, 0.0f);
  w[0] = 2688.0f;
  w[16] = 12.0f;
  w[17] = 3.0f;   // 3 / 2 = 1.5 -> code 3
  w[18] = -5.0f;  // -2.5 -> tie -> 2 -> code 0xC
  const QuantizedMatrix q = quantize_matrix(w, 1, 32);
  EXPECT_EQ(q.global_factor, 1.0f);
  EXPECT_EQ(q.scales[0], 0x7E);  // 2688 / 6 = 448
  EXPECT_EQ(q.scales[1], 0x40);
  EXPECT_EQ(dequantize_element(q, 0, 0), 2688.0f);
  EXPECT_EQ(dequantize_element(q, 0, 16), 12.0f);
  EXPECT_EQ(dequantize_element(q, 0, 17), 3.0f);
  EXPECT_EQ(dequantize_element(q, 0, 18), -4.0f);
}

TEST(Quantize, ZeroBlocksAndZeroTensors) {
  std::vector<float> zeros(32, 0.0f);
  const QuantizedMatrix q = quantize_matrix(zeros, 2, 16);
  EXPECT_EQ(q.global_factor, 1.0f);
  for (auto s : q.scales) EXPECT_EQ(s, 0);
  for (float v : dequantize_matrix(q)) EXPECT_EQ(v, 0.0f);
}

TEST(Quantize, RejectsBadShapes) {
  std::vector<float> w(24);
  EXPECT_THROW(quantize_matrix(w, 1, 24), std::invalid_argument);
  EXPECT_THROW(quantize_matrix(w, 2, 16), std::invalid_argument);
}

TEST(Quantize, GaussianReconstructionSnrIsAbout20dB) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(256 * 1024);
  for (float& v : w) v = normal(rng);
  const std::vector<float> back = dequantize_matrix(quantize_matrix(w, 256, 1024));
  double signal = 0, noise = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    signal += double(w[i]) * w[i];
    noise += double(w[i] - back[i]) * (w[i] - back[i]);
  }
  const double snr_db = 10 * std::log10(signal / noise);
  // Measured 20.4 dB with this reference (docs/models.md); anything far off means a bug.
  EXPECT_GT(snr_db, 19.5);
  EXPECT_LT(snr_db, 21.5);
  RecordProperty("snr_db", std::to_string(snr_db));
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  float halfway;  // 1 + 2^-8: exactly between bf16 1.0 and 1.0078125 -> even (1.0)
  std::uint32_t bits = 0x3F808000u;
  std::memcpy(&halfway, &bits, 4);
  EXPECT_EQ(float_to_bf16(halfway), 0x3F80);
  bits = 0x3F818000u;  // between 0x3F81 and 0x3F82 -> 0x3F82
  std::memcpy(&halfway, &bits, 4);
  EXPECT_EQ(float_to_bf16(halfway), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace nibble::nvfp4
