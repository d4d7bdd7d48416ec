#include "tests/gpu/late_writer.h"

#include "kernels/dependent_launch.cuh"

namespace nibble::gpu_test {
namespace {

__global__ void late_writer_kernel(std::uint16_t* dst, const std::uint16_t* src, std::int64_t n,
                                   long long cycles) {
  kernels::allow_next_grid();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_late_writer(std::uint16_t* dst, const std::uint16_t* src, std::int64_t n,
                               long long cycles, cudaStream_t stream) {
  late_writer_kernel<<<1, 256, 0, stream>>>(dst, src, n, cycles);
  return cudaGetLastError();
}

}  // namespace nibble::gpu_test
