#pragma once
// A kernel for dependent-launch tests: it releases the next kernel in the stream at once
// (allow_next_grid), spins for `cycles` clock cycles, then copies n BF16 values from src to dst,
// so a kernel launched after it with programmatic dependent launch runs while its input is still
// unwritten unless it waits for it.
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::gpu_test {

cudaError_t launch_late_writer(std::uint16_t* dst, const std::uint16_t* src, std::int64_t n,
                               long long cycles, cudaStream_t stream);

}  // namespace nibble::gpu_test
