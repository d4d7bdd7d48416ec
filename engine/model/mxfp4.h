#pragma once
// MXFP4 as the OCP Microscaling spec (v1.0) defines it and gpt-oss ships its experts: blocks of
// 32 E2M1 values sharing one E8M0 scale. A row of K values is K/2 bytes of E2M1 pairs, the
// element of even index in the low nibble, and K/32 scale bytes.
//   E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives
//         (the same codes as NVFP4's elements, kernels/nvfp4/nvfp4_ref.h)
//   E8M0: 2^(e - 127) for e in 0..254; e = 255 is NaN
// value = e2m1 * 2^(e - 127): a power of two, so dequantization is exact in FP32.
#include <cstdint>
#include <span>
#include <vector>

namespace nibble::model::mxfp4 {

inline constexpr std::int64_t kBlockSize = 32;

float e8m0_to_float(std::uint8_t code);

// Row-major [rows, cols] with cols a multiple of kBlockSize.
struct Matrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> packed;  // [rows, cols / 2]
  std::vector<std::uint8_t> scales;  // [rows, cols / 32], E8M0 codes
};

// Row `row` of `m` as floats into out[cols].
void dequantize_row(const Matrix& m, std::int64_t row, std::span<float> out);

// The E2M1 codes and E8M0 scale of one block of 32 values: the scale is the smallest power of
// two that keeps every |value| / scale <= 6 (no clipping), values rounded to nearest, ties to
// even (nvfp4::float_to_e2m1). For the tools that write MXFP4 checkpoints.
void quantize_block(std::span<const float> values, std::span<std::uint8_t> packed,
                    std::uint8_t& scale);

}  // namespace nibble::model::mxfp4
