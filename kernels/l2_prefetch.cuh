#pragma once
// Asking the L2 for bytes a later load will want (sm_90+ bulk prefetch), shared by the MoE router
// (the picked experts' weights) and the one-launch MoE kernel (its down slice's weights).
#include <cstdint>

namespace nibble::kernels {

// bytes from p into the L2 (no completion to wait for: a hint), in bulk requests of up to 256 KB;
// nothing before sm_90 or off 16-byte alignment.
__device__ inline void prefetch_to_l2(const std::uint8_t* p, std::int64_t bytes) {
#if __CUDA_ARCH__ >= 900
  constexpr std::int64_t kChunk = 256 * 1024;
  if (p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 != 0 || bytes % 16 != 0) return;
  for (std::int64_t at = 0; at < bytes; at += kChunk) {
    const unsigned size = unsigned(bytes - at < kChunk ? bytes - at : kChunk);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p + at), "r"(size)
                 : "memory");
  }
#endif
}

}  // namespace nibble::kernels
