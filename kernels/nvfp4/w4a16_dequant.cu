// Dequantisation of the W4A16 layout into dense BF16 (w4a16_dequant.h). A block takes one group
// step (128 weight rows x 64 columns: 4 KB of codes, 512 B of scales), decodes it with the GEMM
// kernels' register decode (w4a16_device.cuh) into shared memory, and writes it out as 16-byte
// row chunks, so every global store is a full, coalesced 128-byte row segment.
#include "kernels/nvfp4/w4a16_dequant.h"

#include <algorithm>

#include "kernels/nvfp4/w4a16_device.cuh"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

constexpr int kThreads = 256;
constexpr int kGroupRows = 128, kStepCols = 64;
constexpr int kWords = kGroupRows / 8 * 32;  // lane words of a group step: 16 tiles x 32 lanes
// Staged row stride in BF16 elements: 144 bytes = 36 banks, so the 8 rows x 4 lanes of one tile's
// 4-byte stores land on 32 different banks; a multiple of 16 bytes for the 16-byte reads.
constexpr int kRowStride = 72;
constexpr std::uint32_t kBf16x2_1024 = 0x44804480u;  // the decode's 2^-10, undone exactly

template <nvfp4::W4A16Format F>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const std::uint8_t* __restrict__ tiles,
                      const std::uint8_t* __restrict__ scales, std::int64_t group_stride,
                      std::int64_t kt_stride, std::int64_t n, std::int64_t k,
                      std::int64_t row_begin, std::int64_t row_end,
                      std::uint16_t* __restrict__ out) {
  __shared__ alignas(16) std::uint16_t staged[kGroupRows * kRowStride];
  const std::int64_t kt = blockIdx.x;
  const std::int64_t group = row_begin / kGroupRows + blockIdx.y;
  const std::int64_t step = group * group_stride + kt * kt_stride;
  const std::uint8_t* step_tiles = tiles + step * 4096;
  const std::uint8_t* step_scales = scales + step * 512;
  for (int word = threadIdx.x; word < kWords; word += kThreads) {
    const int tile = word / 32, lane = word % 32;
    const uint2 codes = *reinterpret_cast<const uint2*>(step_tiles + tile * 256 + lane * 8);
    const std::uint32_t sc =
        *reinterpret_cast<const std::uint32_t*>(step_scales + tile * 32 + (lane / 4) * 4);
    const std::uint32_t scale01 = scales_to_bf16x2<F>(sc);
    const std::uint32_t scale23 = scales_to_bf16x2<F>(sc >> 16);
    // The lane's row; columns 2t, 2t + 1 (lo) and 2t + 8, 2t + 9 (hi) of each k16 step.
    const int row = tile * 8 + lane / 4, t = lane % 4;
    std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(staged + row * kRowStride);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      std::uint32_t lo, hi;
      decode_fragment_pair(codes, scale01, scale23, s, lo, hi);
      dst[s * 8 + t] = bf16x2_mul(lo, kBf16x2_1024);
      dst[s * 8 + 4 + t] = bf16x2_mul(hi, kBf16x2_1024);
    }
  }
  __syncthreads();
  // 128 rows x 8 chunks of 8 columns; k % 16 == 0, so a chunk is wholly inside k or past it.
  for (int c = threadIdx.x; c < kGroupRows * 8; c += kThreads) {
    const int row = c / 8, chunk = c % 8;
    const std::int64_t r = group * kGroupRows + row;
    const std::int64_t col = kt * kStepCols + chunk * 8;
    if (r >= n || r >= row_end || col >= k) continue;
    *reinterpret_cast<uint4*>(out + (r - row_begin) * k + col) =
        *reinterpret_cast<const uint4*>(staged + row * kRowStride + chunk * 8);
  }
}

}  // namespace

cudaError_t w4a16_dequantize(const W4A16DeviceWeight& w, std::int64_t row_begin, std::int64_t rows,
                             std::uint16_t* out, cudaStream_t stream) {
  if (w.n <= 0 || w.k <= 0 || w.k % 16 != 0 || w.n_padded % kGroupRows != 0 ||
      w.k_padded % kStepCols != 0 || row_begin < 0 || row_begin % kGroupRows != 0 || rows < 0 ||
      (reinterpret_cast<std::uintptr_t>(out) & 15) != 0) {
    return cudaErrorInvalidValue;
  }
  const std::int64_t row_end = std::min(w.n, row_begin + rows);
  if (row_end <= row_begin) return cudaSuccess;
  const std::int64_t groups = (row_end - row_begin + kGroupRows - 1) / kGroupRows;
  if (groups > 65535 || w.k_padded / kStepCols > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const W4A16Strides strides = w4a16_strides(w);
  const dim3 grid(unsigned(w.k_padded / kStepCols), unsigned(groups));
  const auto kernel = w.format == nvfp4::W4A16Format::kMxfp4
                          ? dequantize_kernel<nvfp4::W4A16Format::kMxfp4>
                          : dequantize_kernel<nvfp4::W4A16Format::kNvfp4>;
  kernel<<<grid, kThreads, 0, stream>>>(w.tiles, w.scales, strides.group, strides.kt, w.n, w.k,
                                        row_begin, row_end, out);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
