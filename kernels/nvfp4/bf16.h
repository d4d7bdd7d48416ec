#pragma once
// BF16 <-> FP32 on the host: the top 16 bits of an IEEE float, rounded to nearest even.
#include <cstdint>
#include <cstring>

namespace nibble::nvfp4 {

using bf16_bits = std::uint16_t;

inline float bf16_to_float(bf16_bits b) {
  std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16_bits float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
    return bf16_bits((u >> 16) | 0x0040u);  // NaN stays a quiet NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16_bits(u >> 16);
}

}  // namespace nibble::nvfp4
