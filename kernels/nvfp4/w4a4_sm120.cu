// W4A4 block-scaled FP4 kernel (see w4a4_sm120.h). One warp per 16 x 8 output tile, operands
// straight from global memory: the simplest form that exercises the instruction.
#include <cuda_bf16.h>

#include "kernels/nvfp4/w4a4_sm120.h"

#if defined(__CUDA_ARCH__) && \
    (defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL))
#define NIBBLE_W4A4_DEVICE 1
#endif

namespace nibble::kernels {
namespace {

__global__ void w4a4_kernel(const std::uint8_t* __restrict__ xq,
                            const std::uint8_t* __restrict__ xs, const float* __restrict__ x_global,
                            std::int64_t m, const std::uint8_t* __restrict__ wq,
                            const std::uint8_t* __restrict__ ws, float w_global, std::int64_t n,
                            std::int64_t k, std::uint16_t* __restrict__ out) {
#if defined(NIBBLE_W4A4_DEVICE)
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t m0 = std::int64_t(blockIdx.y) * 16;
  const std::int64_t n0 = (std::int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 8;
  if (n0 >= n) return;
  const std::int64_t ra = m0 + g, rb = m0 + g + 8, col = n0 + g;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (std::int64_t k0 = 0; k0 < k; k0 += 64) {
    // A fragment: 8 E2M1 values (4 bytes) per register, rows g / g+8, k offsets t*8 and 32+t*8.
    auto a_word = [&](std::int64_t row, int koff) -> std::uint32_t {
      if (row >= m) return 0;
      return *reinterpret_cast<const std::uint32_t*>(xq + row * (k / 2) + (k0 + koff) / 2);
    };
    auto b_word = [&](int koff) -> std::uint32_t {
      if (col >= n) return 0;
      return *reinterpret_cast<const std::uint32_t*>(wq + col * (k / 2) + (k0 + koff) / 2);
    };
    const std::uint32_t a0 = a_word(ra, t * 8), a1 = a_word(rb, t * 8);
    const std::uint32_t a2 = a_word(ra, 32 + t * 8), a3 = a_word(rb, 32 + t * 8);
    const std::uint32_t b0 = b_word(t * 8), b1 = b_word(32 + t * 8);
    // Four UE4M3 scales (k0..k0+63) of one row per 32-bit word: A's row g (t even) or g+8
    // (t odd), B's column g; selected with byte-id 0 and thread-id 0 of each quad.
    const std::int64_t srow = (t % 2 == 0) ? ra : rb;
    const std::uint32_t sfa =
        srow < m ? *reinterpret_cast<const std::uint32_t*>(xs + srow * (k / 16) + k0 / 16) : 0;
    const std::uint32_t sfb =
        col < n ? *reinterpret_cast<const std::uint32_t*>(ws + col * (k / 16) + k0 / 16) : 0;
    asm volatile(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1."
        "e2m1.f32.ue4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, "
        "%11, {0, 0};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(sfa), "r"(sfb));
  }
  const float scale = *x_global * w_global;
  for (int e = 0; e < 4; ++e) {
    const std::int64_t row = (e < 2) ? ra : rb;
    const std::int64_t cc = n0 + t * 2 + (e & 1);
    if (row < m && cc < n) {
      out[row * n + cc] = __bfloat16_as_ushort(__float2bfloat16_rn(c[e] * scale));
    }
  }
#else
  (void)xq, (void)xs, (void)x_global, (void)m, (void)wq, (void)ws, (void)w_global, (void)n, (void)k,
      (void)out;
#endif
}

}  // namespace

cudaError_t w4a4_linear_sm120(const std::uint8_t* xq, const std::uint8_t* xs, const float* x_global,
                              std::int64_t m, const std::uint8_t* wq, const std::uint8_t* ws,
                              float w_global, std::int64_t n, std::int64_t k, std::uint16_t* out,
                              cudaStream_t stream) {
  int device = 0, major = 0, minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err != cudaSuccess) return err;
  if (major != 12) return cudaErrorNotSupported;
  if (m <= 0 || n <= 0 || k <= 0 || k % 64 != 0) return cudaErrorInvalidValue;
  const int warps = 4;
  const dim3 grid(unsigned((n + 8 * warps - 1) / (8 * warps)), unsigned((m + 15) / 16));
  w4a4_kernel<<<grid, 32 * warps, 0, stream>>>(xq, xs, x_global, m, wq, ws, w_global, n, k, out);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
