#pragma once
// Adds 1 to each element: a toolchain check, not a kernel the engine uses.
#include <cuda_runtime.h>

namespace nibble::kernels {

cudaError_t add_one(float* device_data, int n, cudaStream_t stream = nullptr);

}  // namespace nibble::kernels
