// Activation quantization kernels; see quantize_activations.h for the contract.
#include <cuda_bf16.h>

#include "kernels/nvfp4/e2m1_device.cuh"
#include "kernels/nvfp4/quantize_activations.h"

namespace nibble::kernels {
namespace {

__device__ inline float bf16_bits_to_float(std::uint16_t b) {
  return __uint_as_float(std::uint32_t(b) << 16);
}

// One thread per 16-element block: two 16-byte loads, one 8-byte store, one scale byte.
// The arithmetic follows quantize_row operation by operation so the bytes match exactly.
__global__ void quantize_blocks_kernel(const uint4* __restrict__ x, std::int64_t blocks,
                                       const float* __restrict__ global_factor,
                                       uint2* __restrict__ packed,
                                       std::uint8_t* __restrict__ scales) {
  const std::int64_t b = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const float g = *global_factor;
  const uint4 lo = x[2 * b];
  const uint4 hi = x[2 * b + 1];
  const std::uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  float v[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[2 * i] = bf16_bits_to_float(std::uint16_t(words[i] & 0xFFFF));
    v[2 * i + 1] = bf16_bits_to_float(std::uint16_t(words[i] >> 16));
  }
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(v[i]));
  const std::uint8_t scale_code = e4m3_from_float(__fdiv_rn(__fdiv_rn(amax, 6.0f), g));
  scales[b] = scale_code;
  const float step = __fmul_rn(e4m3_to_float_bits(scale_code), g);
  std::uint32_t out[2] = {0, 0};
  if (step > 0.0f) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t byte =
          e2m1x2_from_floats(__fdiv_rn(v[2 * i], step), __fdiv_rn(v[2 * i + 1], step));
      out[i / 4] |= byte << (8 * (i % 4));
    }
  }
  packed[b] = make_uint2(out[0], out[1]);
}

__global__ void amax_kernel(const std::uint16_t* __restrict__ x, std::int64_t count,
                            float* __restrict__ amax) {
  float m = 0.0f;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    m = fmaxf(m, fabsf(bf16_bits_to_float(x[i])));
  }
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  // Non-negative floats order like their bit patterns, so an integer max is a float max.
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
}

__global__ void global_factor_kernel(const float* amax, float* global_factor) {
  const float a = *amax;
  *global_factor = a > 0.0f ? __fdiv_rn(a, 6.0f * 448.0f) : 1.0f;
}

__global__ void e2m1_codes_kernel(std::uint32_t first, std::uint32_t count, std::uint8_t* codes) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = __uint_as_float(first + i);
  // Through the packing entry point, so the hardware path is what gets checked where it exists.
  codes[i] = e2m1x2_from_floats(x, 0.0f) & 0xF;
}

}  // namespace

cudaError_t quantize_bf16_to_nvfp4(const std::uint16_t* x, std::int64_t rows, std::int64_t k,
                                   const float* global_factor, std::uint8_t* packed,
                                   std::uint8_t* scales, cudaStream_t stream) {
  if (rows < 0 || k <= 0 || k % 16 != 0) return cudaErrorInvalidValue;
  const std::int64_t blocks = rows * (k / 16);
  if (blocks == 0) return cudaSuccess;
  const int threads = 256;
  quantize_blocks_kernel<<<unsigned((blocks + threads - 1) / threads), threads, 0, stream>>>(
      reinterpret_cast<const uint4*>(x), blocks, global_factor, reinterpret_cast<uint2*>(packed),
      scales);
  return cudaGetLastError();
}

cudaError_t nvfp4_global_factor_bf16(const std::uint16_t* x, std::int64_t count,
                                     float* amax_scratch, float* global_factor,
                                     cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(amax_scratch, 0, sizeof(float), stream);
  if (err != cudaSuccess) return err;
  const std::int64_t wanted = (count + 255) / 256;
  const unsigned grid = unsigned(wanted < 1 ? 1 : (wanted > 1024 ? 1024 : wanted));
  amax_kernel<<<grid, 256, 0, stream>>>(x, count, amax_scratch);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  global_factor_kernel<<<1, 1, 0, stream>>>(amax_scratch, global_factor);
  return cudaGetLastError();
}

cudaError_t e2m1_codes_for_bit_range(std::uint32_t first, std::uint32_t count, std::uint8_t* codes,
                                     cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  e2m1_codes_kernel<<<(count + 255) / 256, 256, 0, stream>>>(first, count, codes);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
