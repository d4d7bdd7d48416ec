#pragma once
// nibble::kernels_dev: W4A16 tile variants the planner never picks (nvfp4_linear.h), kept for the
// kernel bench and the GPU tests only, out of the production library (issue 20, item 5): the kGemv
// decode kernel (w4a16_gemv.cu), slower than the slice and 8-row tiles at every M <= 16 shape
// measured; the 16-row tiles kM16 and kM16Wide (kM16Swap and the slices beat them); the 64-row
// slices; and every grouped form but kSlice16's and kM64's (w4a16_dev_launchers.h).
#include <cuda_runtime.h>

namespace nibble::kernels {

// Lets w4a16_linear run the dev-only tiles (it answers cudaErrorNotSupported for them before).
// Call once at start-up, before any launch; idempotent.
void w4a16_enable_dev_tiles();

}  // namespace nibble::kernels
