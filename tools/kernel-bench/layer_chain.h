#pragma once
// The Llama-3.1-8B linear layer set as a decode step runs it: qkv, o, gate_up and down back to
// back in one CUDA graph (each set a different copy of the weights, so L2 holds none), timed per
// set. The per-layer numbers of nibble-kernel-bench repeat one layer; here every kernel follows a
// different one, and with programmatic dependent launch a layer's blocks may start during the
// previous layer's tail. Also timed: the same chain of cuBLAS BF16 GEMMs and of read-only kernels.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/nvfp4_linear.h"

namespace nibble::bench {

struct LayerChainTimes {
  std::int64_t m = 0;
  double ours_us = 0, ours_overlap_us = 0, cublas_us = 0, read_us = 0;
};

// Weights are random (fixed seed); prints nothing. weight_bytes: the set's NVFP4 bytes (codes +
// scales, unpadded) for bandwidth ratios.
std::vector<LayerChainTimes> time_llama_chain(const std::vector<std::int64_t>& ms, int reps,
                                              const kernels::DeviceTraits& device,
                                              cublasHandle_t cublas, cudaStream_t stream,
                                              double* weight_bytes);

}  // namespace nibble::bench
