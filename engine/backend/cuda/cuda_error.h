#pragma once
// CUDA and cuBLAS status codes -> BackendError naming the call that failed.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "engine/backend/backend.h"

namespace nibble::backend::cuda {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw BackendError(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}

inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw BackendError(std::string("cuda backend: ") + what + ": " + cublasGetStatusString(status));
}

}  // namespace nibble::backend::cuda
