// MXFP4 against the OCP Microscaling spec (v1.0), written out here independently of
// engine/model/mxfp4.cpp: E2M1 is sign, 2 exponent bits (bias 1) and 1 mantissa bit (exponent 0
// is subnormal: mantissa * 0.5); E8M0 is 2^(e - 127) with e = 255 NaN; a value is their product,
// element 2i in the low nibble of byte i. Every (byte, scale) pair is checked bit for bit, then
// random matrices; and quantize_block's choice of scale.
#include "engine/model/mxfp4.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

namespace nibble::model::mxfp4 {
namespace {

// The spec's definition in double, then rounded to float (exact: every value is representable).
double ocp_e2m1(unsigned code) {
  const int sign = (code >> 3) & 1, exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude =
      exponent == 0 ? mantissa * 0.5 : std::ldexp(1.0 + mantissa * 0.5, exponent - 1);
  return sign ? -magnitude : magnitude;
}

double ocp_e8m0(unsigned code) {
  return code == 255 ? std::nan("") : std::pow(2.0, int(code) - 127);
}

float ocp_value(std::uint8_t byte, int nibble, std::uint8_t scale) {
  return float(ocp_e2m1(nibble == 0 ? byte & 0xF : byte >> 4) * ocp_e8m0(scale));
}

bool same_bits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(Mxfp4, E2M1CodesAreTheSpecsSixteenValues) {
  const double want[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (unsigned c = 0; c < 16; ++c) EXPECT_EQ(ocp_e2m1(c), want[c]) << c;
}

TEST(Mxfp4, E8M0IsAPowerOfTwoAnd255IsNaN) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(128), 2.0f);
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));  // a subnormal float, still exact
  EXPECT_EQ(e8m0_to_float(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
}

// Every byte under every scale: one row of 32 values per (scale, 16 bytes).
TEST(Mxfp4, DequantizeIsBitExactForEveryByteAndScale) {
  for (unsigned scale = 0; scale < 256; ++scale) {
    for (unsigned first = 0; first < 256; first += 16) {
      Matrix m;
      m.rows = 1;
      m.cols = kBlockSize;
      for (unsigned i = 0; i < 16; ++i) m.packed.push_back(std::uint8_t(first + i));
      m.scales = {std::uint8_t(scale)};
      std::vector<float> out(kBlockSize);
      dequantize_row(m, 0, out);
      for (unsigned i = 0; i < 16; ++i)
        for (int nibble = 0; nibble < 2; ++nibble)
          ASSERT_TRUE(same_bits(out[2 * i + unsigned(nibble)],
                                ocp_value(m.packed[i], nibble, std::uint8_t(scale))))
              << "scale " << scale << " byte " << int(m.packed[i]) << " nibble " << nibble;
    }
  }
}

TEST(Mxfp4, DequantizeIsBitExactOnRandomMatrices) {
  std::mt19937 gen(20261206);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 20; ++trial) {
    Matrix m;
    m.rows = 1 + trial % 5;
    m.cols = kBlockSize * (1 + trial % 7);
    m.packed.resize(std::size_t(m.rows * m.cols / 2));
    m.scales.resize(std::size_t(m.rows * m.cols / kBlockSize));
    for (auto& b : m.packed) b = std::uint8_t(byte(gen));
    for (auto& s : m.scales) s = std::uint8_t(byte(gen));
    std::vector<float> out(std::size_t(m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      dequantize_row(m, r, out);
      for (std::int64_t c = 0; c < m.cols; ++c) {
        const std::uint8_t b = m.packed[std::size_t(r * m.cols / 2 + c / 2)];
        const std::uint8_t s = m.scales[std::size_t(r * m.cols / kBlockSize + c / kBlockSize)];
        ASSERT_TRUE(same_bits(out[std::size_t(c)], ocp_value(b, int(c % 2), s)))
            << "trial " << trial << " row " << r << " col " << c;
      }
    }
  }
}

// The scale is the smallest power of two with amax / scale <= 6; values already on the grid
// come back exactly.
TEST(Mxfp4, QuantizeBlockPicksTheSmallestScaleThatDoesNotClip) {
  std::vector<float> values(kBlockSize, 0.0f);
  values[0] = 6.0f;
  values[1] = -0.5f;
  values[5] = 3.0f;
  std::vector<std::uint8_t> packed(kBlockSize / 2);
  std::uint8_t scale = 0;
  quantize_block(values, packed, scale);
  EXPECT_EQ(scale, 127);  // 2^0
  Matrix m{1, kBlockSize, packed, {scale}};
  std::vector<float> back(kBlockSize);
  dequantize_row(m, 0, back);
  EXPECT_EQ(back, values);

  for (auto& v : values) v *= 0.25f;  // amax 1.5: scale 2^-2
  quantize_block(values, packed, scale);
  EXPECT_EQ(scale, 125);
  values[0] = 6.5f;  // amax just above 6: scale 2
  quantize_block(values, packed, scale);
  EXPECT_EQ(scale, 128);
}

}  // namespace
}  // namespace nibble::model::mxfp4
