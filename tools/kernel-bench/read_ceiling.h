#pragma once
// Read-only streaming kernels for nibble-kernel-bench: the time a kernel needs just to read a
// W4A16 weight (tiles + scales) once, with no arithmetic, in two access orders:
//   linear:  the whole grid sweeps both arrays front to back (16-byte loads, 4 in flight per
//            thread): the best case for DRAM;
//   grouped: the exact byte order of the 16-row W4A16 tile kernel (one block per 128-row group
//            and K split, 4 KB of tiles + 512 B of scales per k step, 4 k steps in flight), so
//            the gap between this and `linear` is what the access pattern alone costs.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::bench {

// sink: one device word; written only if the data XOR to an impossible value (keeps the loads).
cudaError_t read_weight_linear(const kernels::W4A16DeviceWeight& w, unsigned* sink, int sm_count,
                               cudaStream_t stream);
cudaError_t read_weight_grouped(const kernels::W4A16DeviceWeight& w, int splits, unsigned* sink,
                                cudaStream_t stream);

}  // namespace nibble::bench
