#pragma once
// The FP8 KV cache format (--kv-cache-dtype fp8), on the host: every (token, KV head) row of
// head_dim values is stored as E4M3 codes (float8_e4m3fn) with one BF16 scale, so that the row's
// largest magnitude lands at or just below E4M3's 448: scale = amax / 448 rounded up to BF16
// (1 when the row is all zeros), code = E4M3(x * (1 / scale)), rounded to nearest even and
// saturated at 448. A value decodes as e4m3(code) * scale. Per-row scales follow each token's
// own range (no calibration pass, nothing to go stale) for 2 bytes per row: 2 * D + 2 bytes for
// keys and values against 4 * D in BF16 (1.97x the tokens at head_dim 128). The device side
// (kernels/attention/kv_fp8.cuh and the store kernel in kernels/layer) computes exactly this.
#include <cstdint>
#include <span>

#include "kernels/attention/kv_fp8_format.h"

namespace nibble::kernels {

// Quantises one row; returns its scale's BF16 bits.
std::uint16_t quantize_kv_row(std::span<const float> row, std::span<std::uint8_t> codes);

float dequantize_kv(std::uint8_t code, std::uint16_t scale_bits);

}  // namespace nibble::kernels
