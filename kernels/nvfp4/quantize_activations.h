#pragma once
// BF16 activations -> NVFP4 on the device, byte-identical to nvfp4::quantize_row:
// per row of k values (k % 16 == 0), one E4M3 block scale per 16 values and E2M1 pairs
// (element 2i in the low nibble), with one FP32 global factor (multiply form) per tensor.
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::kernels {

// x: [rows, k] BF16 bits, row-major. global_factor: one float on the device (so that a
// preceding amax kernel or a static input scale can provide it without a host round trip).
// packed: [rows, k/2]; scales: [rows, k/16].
cudaError_t quantize_bf16_to_nvfp4(const std::uint16_t* x, std::int64_t rows, std::int64_t k,
                                   const float* global_factor, std::uint8_t* packed,
                                   std::uint8_t* scales, cudaStream_t stream);

// Writes global_factor = amax(|x|) / (6 * 448) (1 when amax == 0), as
// nvfp4::global_factor_for_amax. amax_scratch: one float of device memory.
cudaError_t nvfp4_global_factor_bf16(const std::uint16_t* x, std::int64_t count,
                                     float* amax_scratch, float* global_factor,
                                     cudaStream_t stream);

// Test hook: E2M1 codes (low nibble, one per byte) of the floats whose bit patterns are
// first, first+1, ..., first+count-1, through the same device conversion the kernels use.
cudaError_t e2m1_codes_for_bit_range(std::uint32_t first, std::uint32_t count, std::uint8_t* codes,
                                     cudaStream_t stream);

}  // namespace nibble::kernels
