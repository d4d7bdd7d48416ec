// Read-only streaming kernels (read_ceiling.h).
#include "tools/kernel-bench/read_ceiling.h"

namespace nibble::bench {
namespace {

constexpr unsigned kImpossible = 0x9E3779B9u;

__device__ inline unsigned fold(uint4 v) {
  return v.x ^ v.y ^ v.z ^ v.w;
}

__device__ inline unsigned read_range(const uint4* __restrict__ p, std::int64_t count) {
  unsigned acc = 0;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 v0 = __ldcs(p + i), v1 = __ldcs(p + i + stride), v2 = __ldcs(p + i + 2 * stride),
                v3 = __ldcs(p + i + 3 * stride);
    acc ^= fold(v0) ^ fold(v1) ^ fold(v2) ^ fold(v3);
  }
  for (; i < count; i += stride) acc ^= fold(__ldcs(p + i));
  return acc;
}

__global__ void __launch_bounds__(256)
    read_linear_kernel(const uint4* __restrict__ a, std::int64_t a_count,
                       const uint4* __restrict__ b, std::int64_t b_count, unsigned* sink) {
  const unsigned acc = read_range(a, a_count) ^ read_range(b, b_count);
  if (acc == kImpossible) *sink = acc;
}

// 128 threads per block: per k step each thread reads 2 x 16 B of tiles, threads 0..31 16 B of
// scales, as the 16-row tile kernel's cp.async does.
__global__ void __launch_bounds__(128)
    read_grouped_kernel(const std::uint8_t* __restrict__ tiles,
                        const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                        kernels::W4A16Strides strides, int kt_per_split, unsigned* sink) {
  const std::int64_t kt_begin = std::int64_t(blockIdx.y) * kt_per_split;
  const std::int64_t kt_end = kt_begin + kt_per_split < tiles_k ? kt_begin + kt_per_split : tiles_k;
  const std::uint8_t* t = tiles + std::int64_t(blockIdx.x) * strides.group * 4096;
  const std::uint8_t* s = scales + std::int64_t(blockIdx.x) * strides.group * 512;
  const int tid = threadIdx.x;
  unsigned acc = 0;
  constexpr int kAhead = 4;
  for (std::int64_t kt = kt_begin; kt < kt_end; kt += kAhead) {
    uint4 v[kAhead][3];
#pragma unroll
    for (int d = 0; d < kAhead; ++d) {
      const std::int64_t at = kt + d < kt_end ? (kt + d) * strides.kt : kt_begin * strides.kt;
      const uint4* tv = reinterpret_cast<const uint4*>(t + at * 4096);
      v[d][0] = __ldcs(tv + tid);
      v[d][1] = __ldcs(tv + tid + 128);
      v[d][2] = tid < 32 ? __ldcs(reinterpret_cast<const uint4*>(s + at * 512) + tid)
                         : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int d = 0; d < kAhead; ++d) acc ^= fold(v[d][0]) ^ fold(v[d][1]) ^ fold(v[d][2]);
  }
  if (acc == kImpossible) *sink = acc;
}

}  // namespace

cudaError_t read_weight_linear(const kernels::W4A16DeviceWeight& w, unsigned* sink, int sm_count,
                               cudaStream_t stream) {
  const std::int64_t tiles16 = w.n_padded * w.k_padded / 2 / 16;
  const std::int64_t scales16 = w.n_padded * w.k_padded / 16 / 16;
  read_linear_kernel<<<unsigned(sm_count * 8), 256, 0, stream>>>(
      reinterpret_cast<const uint4*>(w.tiles), tiles16, reinterpret_cast<const uint4*>(w.scales),
      scales16, sink);
  return cudaGetLastError();
}

cudaError_t read_weight_grouped(const kernels::W4A16DeviceWeight& w, int splits, unsigned* sink,
                                cudaStream_t stream) {
  const std::int64_t tiles_k = w.k_padded / 64;
  if (splits < 1) splits = 1;
  if (splits > tiles_k) splits = int(tiles_k);
  const int kt_per_split = int((tiles_k + splits - 1) / splits);
  splits = int((tiles_k + kt_per_split - 1) / kt_per_split);
  const dim3 grid(unsigned(w.n_padded / 128), unsigned(splits));
  read_grouped_kernel<<<grid, 128, 0, stream>>>(w.tiles, w.scales, tiles_k,
                                                kernels::w4a16_strides(w), kt_per_split, sink);
  return cudaGetLastError();
}

}  // namespace nibble::bench
