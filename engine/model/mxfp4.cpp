#include "engine/model/mxfp4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::model::mxfp4 {

float e8m0_to_float(std::uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(code) - 127);  // 2^-127 is a subnormal float, still exact
}

void dequantize_row(const Matrix& m, std::int64_t row, std::span<float> out) {
  if (std::int64_t(out.size()) != m.cols || m.cols % kBlockSize != 0)
    throw std::invalid_argument("mxfp4 dequantize_row: out has " + std::to_string(out.size()) +
                                " values for a row of " + std::to_string(m.cols));
  static const auto e2m1 = [] {
    std::array<float, 16> t{};
    for (int i = 0; i < 16; ++i) t[std::size_t(i)] = nvfp4::e2m1_to_float(std::uint8_t(i));
    return t;
  }();
  const std::uint8_t* packed = m.packed.data() + row * m.cols / 2;
  const std::uint8_t* scales = m.scales.data() + row * m.cols / kBlockSize;
  for (std::int64_t b = 0; b < m.cols / kBlockSize; ++b) {
    const float scale = e8m0_to_float(scales[b]);
    for (std::int64_t i = 0; i < kBlockSize / 2; ++i) {
      const std::uint8_t byte = packed[b * kBlockSize / 2 + i];
      out[std::size_t(b * kBlockSize + 2 * i)] = e2m1[byte & 0xF] * scale;
      out[std::size_t(b * kBlockSize + 2 * i + 1)] = e2m1[byte >> 4] * scale;
    }
  }
}

void quantize_block(std::span<const float> values, std::span<std::uint8_t> packed,
                    std::uint8_t& scale) {
  if (std::int64_t(values.size()) != kBlockSize || std::int64_t(packed.size()) != kBlockSize / 2)
    throw std::invalid_argument("mxfp4 quantize_block: a block is 32 values into 16 bytes");
  float amax = 0.0f;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  int e = 0;  // the scale's exponent: amax / 2^e <= 6
  if (amax > 0.0f && std::isfinite(amax)) {
    e = int(std::ceil(std::log2(amax / 6.0f)));
    while (e > -127 && amax / std::ldexp(1.0f, e - 1) <= 6.0f) --e;  // log2's rounding
    while (amax / std::ldexp(1.0f, e) > 6.0f) ++e;
  }
  e = std::clamp(e, -127, 127);
  scale = std::uint8_t(e + 127);
  const float step = e8m0_to_float(scale);
  for (std::size_t i = 0; i < packed.size(); ++i)
    packed[i] = std::uint8_t(nvfp4::float_to_e2m1(values[2 * i] / step) |
                             (nvfp4::float_to_e2m1(values[2 * i + 1] / step) << 4));
}

}  // namespace nibble::model::mxfp4
