// A first kernel that proves the toolchain builds for every architecture in
// NIBBLE_CUDA_ARCHITECTURES; replaced by the real kernel families as they land.
#include <cuda_runtime.h>

#include "kernels/smoke/smoke_kernel.h"

namespace nibble::kernels {

__global__ void add_one_kernel(float* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.0f;
}

cudaError_t add_one(float* device_data, int n, cudaStream_t stream) {
  add_one_kernel<<<(n + 255) / 256, 256, 0, stream>>>(device_data, n);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
