#pragma once
// W4A4 linear layer for sm_120a/sm_121a (RTX 50, GB10): activations and weights both NVFP4,
// block-scaled FP4 mma.sync (kind::mxf4nvf4, m16n8k64, UE4M3 scales per 16 along K).
// Built only for those targets (kernels compiled for others contain no code and the entry
// point returns cudaErrorNotSupported). It has never run on hardware: the fragment and
// scale-selector layouts follow the PTX ISA as read, unverified; the dispatcher does not use it,
// and it is built into nibble::kernels_dev (NIBBLE_HAVE_W4A4 there) until a device runs it.
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::kernels {

// xq: [m, k/2] E2M1 pairs, xs: [m, k/16] E4M3 (from quantize_bf16_to_nvfp4), x_global: one
// float on the device; wq: [n, k/2], ws: [n, k/16] (checkpoint layout), w_global: host float.
// out: [m, n] BF16 bits. k % 64 == 0.
cudaError_t w4a4_linear_sm120(const std::uint8_t* xq, const std::uint8_t* xs, const float* x_global,
                              std::int64_t m, const std::uint8_t* wq, const std::uint8_t* ws,
                              float w_global, std::int64_t n, std::int64_t k, std::uint16_t* out,
                              cudaStream_t stream);

}  // namespace nibble::kernels
