#pragma once
// The mma.sync ceiling of the device for nibble-kernel-bench: back-to-back independent
// mma.sync m16n8k16 BF16 -> FP32 from registers (no memory traffic, no other instructions in the
// loop), one block of `warps_per_sm` warps per SM. It is the rate the W4A16 kernels' tensor-core
// work can at best reach on this path (kernels/nvfp4/PERF_NOTES.md v13: measured before any
// further large-M tuning); cuBLAS on sm_90 uses wgmma, which this does not.
#include <cuda_runtime.h>

namespace nibble::bench {

// *tflops: 2 * 16 * 8 * 16 FLOP per mma.sync over the median of `reps` timed launches (after one
// warm-up). sink: one device word, written only if the sums reach an impossible value (keeps the
// mma.sync results live). Returns the first CUDA error.
cudaError_t mma_sync_ceiling(int sm_count, int warps_per_sm, int reps, unsigned* sink,
                             cudaStream_t stream, double* tflops);

}  // namespace nibble::bench
