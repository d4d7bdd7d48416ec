#pragma once
// Warp-level tensor-core and async-copy primitives shared by the kernels (the NVFP4 linears, the
// flash attention): cp.async to shared memory, ldmatrix, mma.sync m16n8k16 BF16 with FP32
// accumulators. All run on sm_80 and later, so on sm_90 and on sm_120/121 (GB10) alike.
#include <cstdint>

namespace nibble::kernels {

// 16 bytes global -> shared (a shared-memory address, cvta already applied); src_bytes 0 fills
// zeros and reads nothing.
__device__ inline void cp_async16_to(unsigned smem_address, const void* gmem, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address), "l"(gmem),
               "r"(src_bytes));
}
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices from shared memory (a shared-memory address); lanes 8i..8i+7 give the
// row addresses of matrix i.
__device__ inline void ldmatrix_x4_at(std::uint32_t (&r)[4], unsigned smem_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address));
}
// The same, each matrix transposed (an mma B operand from row-major [k][n] rows).
__device__ inline void ldmatrix_x4_trans_at(std::uint32_t (&r)[4], unsigned smem_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address));
}

// c += a . b on a 16x8x16 BF16 tile, FP32 accumulators.
__device__ inline void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace nibble::kernels
