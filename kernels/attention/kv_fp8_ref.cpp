#include "kernels/attention/kv_fp8_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::kernels {

std::uint16_t quantize_kv_row(std::span<const float> row, std::span<std::uint8_t> codes) {
  if (codes.size() != row.size()) throw std::invalid_argument("quantize_kv_row: sizes differ");
  float amax = 0.0f;
  for (float x : row) amax = std::max(amax, std::fabs(x));
  const std::uint16_t scale = kv_fp8_scale(amax);
  const float inv = 1.0f / nvfp4::bf16_to_float(scale);
  for (std::size_t i = 0; i < row.size(); ++i) codes[i] = nvfp4::float_to_e4m3(row[i] * inv);
  return scale;
}

float dequantize_kv(std::uint8_t code, std::uint16_t scale_bits) {
  return nvfp4::e4m3_to_float(code) * nvfp4::bf16_to_float(scale_bits);
}

}  // namespace nibble::kernels
