#pragma once
// Keeping a grid evenly spread over the SMs under programmatic dependent launch. A block that may
// start while the previous kernel still holds the SMs lands wherever there is room: several on
// some SMs, none on others, and the crowded SMs then set the kernel's time (Llama decode chain
// at M = 1 on H100 with the slice tiles: 77 us with overlap against 57 without). Asking each
// block for enough shared memory that an SM can hold no more blocks than an even spread gives it
// keeps any placement even; the surplus goes unused.
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::kernels {

// The current device's SM count and shared memory (read once per thread and device).
struct SmemBudget {
  int sms = 0, per_sm = 0, reserved_per_block = 0;
  int per_block_max = 0;  // dynamic shared memory a block may ask for (1 KB left for static)
};
cudaError_t current_smem_budget(SmemBudget* budget);

// Dynamic shared memory for a block of a `blocks` grid that needs `needed` bytes: at least
// `needed`, and where the device allows it enough that no SM fits more than
// ceil(blocks / SMs) of them.
int even_spread_smem(int needed, std::int64_t blocks, const SmemBudget& sm);

// Lets `kernel` take all the dynamic shared memory a block may have on the current device (less
// its own static shared memory beyond the 1 KB the budget leaves); once per kernel, before any
// stream capture.
cudaError_t allow_all_block_smem(const void* kernel);
// The dynamic shared memory to launch a `blocks` grid with: `needed`, or under overlap
// even_spread_smem over the current device (the kernel allowed all a block may have).
cudaError_t launch_smem(int needed, std::int64_t blocks, bool overlap, int* smem);

}  // namespace nibble::kernels
