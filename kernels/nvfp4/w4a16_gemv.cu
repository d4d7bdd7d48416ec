// W4A16 decode kernel (W4A16Tile::kGemv): the same repacked weights and mma.sync decode as
// w4a16_gemm.cu, but every warp streams its own weights through a private cp.async ring in shared
// memory (kDepth - 1 k steps in flight, only __syncwarp between steps, no block barriers). A
// warp's 4 tiles of one k step are 1 KB of codes + 128 B of scales, contiguous. The x slice is
// staged once per 16 k steps (ldmatrix reads it).
//
// Block: 8 warps on one 128-row weight group and one K range (the split). Warp w takes tiles
// 4*(w%4) .. +3 and k steps kt = begin + w/4 + 2*i. Partial sums meet in shared memory
// (atomics), then go out directly (one split) or through the split-K workspace (last block to
// arrive writes, as in w4a16_gemm.cu).
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

constexpr int kThreads = 256;
constexpr int kTilesPerWarp = 4;  // 8-row tiles per warp: 4 warps cover the 128-row group
constexpr int kStreams = 2;       // k-step streams per quarter group (warps / 4)
constexpr int kDepth = 6;         // ring slots per warp: kDepth - 1 k steps in flight
constexpr int kChunkKt = 16;      // x staged 16 k steps at a time: 16 rows x 1024 cols = 32 KB
constexpr int kRows = 16;         // rows of x per block (one m16 fragment)
constexpr int kGroupN = 128;      // weight rows per block (kW4A16TileCols)
constexpr int kStepCodes = kTilesPerWarp * 256;  // bytes of codes per warp and k step
constexpr int kStepBytes = kStepCodes + kTilesPerWarp * 32;
constexpr int kXBytes = kChunkKt * kRows * 128;
constexpr int kPartialBytes = kRows * kGroupN * 4;
constexpr int kRingBytes = (kThreads / 32) * kDepth * kStepBytes;
constexpr int kSmem = kXBytes + kPartialBytes + kRingBytes;  // 95.3 KB (GB10: <= 99 KB)

// One warp's k step into its ring slot: 1 KB of codes (two 16-byte copies per lane) and
// 128 B of scales (lanes 0..7).
__device__ inline void issue_step(std::uint8_t* slot, const std::uint8_t* __restrict__ tiles_kt,
                                  const std::uint8_t* __restrict__ scales_kt, int lane) {
  cp_async16(slot + lane * 32, tiles_kt + lane * 32, true);
  cp_async16(slot + lane * 32 + 16, tiles_kt + lane * 32 + 16, true);
  if (lane < kTilesPerWarp * 2)
    cp_async16(slot + kStepCodes + lane * 16, scales_kt + lane * 16, true);
}

// x slice in shared memory: [k step][16 rows][8 chunks of 16 B], chunk ch of row r stored at
// ch ^ (r % 8) so that ldmatrix's 8 rows of one chunk hit 8 different bank groups.
__device__ inline void compute_step(float (&acc)[kTilesPerWarp][4], const std::uint8_t* slot,
                                    const std::uint8_t* xs_kt, int lane) {
  uint2 codes[kTilesPerWarp];
  std::uint32_t s01[kTilesPerWarp], s23[kTilesPerWarp];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    codes[j] = *reinterpret_cast<const uint2*>(slot + j * 256 + lane * 8);
    const std::uint32_t sc =
        *reinterpret_cast<const std::uint32_t*>(slot + kStepCodes + j * 32 + (lane / 4) * 4);
    s01[j] = e4m3x2_to_scaled_bf16x2(sc);
    s23[j] = e4m3x2_to_scaled_bf16x2(sc >> 16);
  }
#pragma unroll
  for (int step = 0; step < 4; ++step) {
    std::uint32_t a[4];
    const int row = lane & 15;
    const int chunk = 2 * step + (lane >> 4);
    ldmatrix_x4(a, xs_kt + row * 128 + ((chunk ^ (row & 7)) * 16));
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; ++j) {
      const std::uint32_t word = step < 2 ? codes[j].x : codes[j].y;
      const std::uint32_t pair = step < 2 ? s01[j] : s23[j];
      const std::uint32_t s2 = __byte_perm(pair, 0, (step & 1) ? 0x3232 : 0x1010);
      const std::uint32_t b0 =
          bf16x2_mul((step & 1) ? tiny_bf16x2<2>(word) : tiny_bf16x2<0>(word), s2);
      const std::uint32_t b1 =
          bf16x2_mul((step & 1) ? tiny_bf16x2<3>(word) : tiny_bf16x2<1>(word), s2);
      mma_bf16(acc[j], a, b0, b1);
    }
  }
}

__global__ void __launch_bounds__(kThreads, kW4A16GemvBlocksPerSm)
    w4a16_gemv_kernel(const std::uint16_t* __restrict__ x, std::int64_t m, std::int64_t n,
                      std::int64_t k, const std::uint8_t* __restrict__ tiles,
                      const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                      W4A16Strides strides, float out_scale,
                      const std::uint16_t* __restrict__ residual, std::uint16_t* __restrict__ out,
                      float* __restrict__ workspace, int kt_per_split) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* xs = smem;
  float* partial = reinterpret_cast<float*>(smem + kXBytes);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  std::uint8_t* ring = smem + kXBytes + kPartialBytes + warp * kDepth * kStepBytes;
  const int quarter = warp % 4, stream = warp / 4;
  const std::int64_t m0 = std::int64_t(blockIdx.y) * kRows;
  const std::int64_t n0 = std::int64_t(blockIdx.x) * kGroupN;
  const int rows = int(m - m0 < kRows ? m - m0 : kRows);
  // This warp's 4 tiles inside the group's 4 KB (+ 512 B of scales) per k step.
  const std::uint8_t* my_tiles =
      tiles + std::int64_t(blockIdx.x) * strides.group * 4096 + quarter * kStepCodes;
  const std::uint8_t* my_scales =
      scales + std::int64_t(blockIdx.x) * strides.group * 512 + quarter * kTilesPerWarp * 32;
  const std::int64_t tile_step = strides.kt * 4096, scale_step = strides.kt * 512;
  const std::int64_t kt_begin = std::int64_t(blockIdx.z) * kt_per_split;
  const std::int64_t kt_end = kt_begin + kt_per_split < tiles_k ? kt_begin + kt_per_split : tiles_k;

  wait_for_previous_grid();  // x is read from the first chunk on
  allow_next_grid();         // as the tiles of w4a16_gemm.cu: at most two kernels overlap
  for (int i = threadIdx.x; i < kRows * kGroupN; i += kThreads) partial[i] = 0.0f;
  float acc[kTilesPerWarp][4];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  for (std::int64_t c0 = kt_begin; c0 < kt_end; c0 += kChunkKt) {
    const std::int64_t c1 = c0 + kChunkKt < kt_end ? c0 + kChunkKt : kt_end;
    const int nkt = int(c1 - c0);
    const int steps = (nkt - stream + kStreams - 1) / kStreams;  // this warp's k steps
    __syncthreads();  // the previous chunk's readers are done with xs and the ring
    // Group 0: the x slice (rows past m and columns past k zero-filled: source size 0).
    for (int c = threadIdx.x; c < kRows * nkt * 8; c += kThreads) {
      const int r = c / (nkt * 8), col_chunk = c % (nkt * 8);
      const int ktl = col_chunk / 8, ch = col_chunk % 8;
      const std::int64_t col = (c0 + ktl) * 64 + ch * 8;
      const bool valid = r < rows && col < k;
      cp_async16(xs + ktl * 2048 + r * 128 + ((ch ^ (r & 7)) * 16),
                 valid ? x + (m0 + r) * k + col : x, valid);
    }
    cp_async_commit();
    // Groups 1 .. kDepth - 1: this warp's first k steps (empty groups past its last step keep
    // the count that wait_group relies on).
#pragma unroll
    for (int d = 0; d < kDepth - 1; ++d) {
      if (d < steps) {
        const std::int64_t kt = c0 + stream + std::int64_t(d) * kStreams;
        issue_step(ring + d * kStepBytes, my_tiles + kt * tile_step, my_scales + kt * scale_step,
                   lane);
      }
      cp_async_commit();
    }
    cp_async_wait<kDepth - 1>();  // the x slice (oldest group) has landed for this thread
    __syncthreads();              // ... and for every thread
    int slot = 0, refill = kDepth - 1;
    for (int i = 0; i < steps; ++i) {
      cp_async_wait<kDepth - 2>();  // step i has landed for this lane
      __syncwarp();                 // ... for every lane; and all lanes are done with step i - 1
      if (i + kDepth - 1 < steps) {
        const std::int64_t kt = c0 + stream + std::int64_t(i + kDepth - 1) * kStreams;
        issue_step(ring + refill * kStepBytes, my_tiles + kt * tile_step,
                   my_scales + kt * scale_step, lane);
      }
      cp_async_commit();
      compute_step(acc, ring + slot * kStepBytes, xs + (stream + i * kStreams) * 2048, lane);
      slot = slot + 1 == kDepth ? 0 : slot + 1;
      refill = refill + 1 == kDepth ? 0 : refill + 1;
    }
    cp_async_wait<0>();
  }

  // c0,c1 at (row g, cols 2t, 2t+1) of the tile, c2,c3 at row g + 8.
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = lane / 4 + 8 * h;
      if (row >= rows) continue;
      const int col = (quarter * kTilesPerWarp + j) * 8 + (lane % 4) * 2;
      atomicAdd(&partial[row * kGroupN + col], acc[j][2 * h]);
      atomicAdd(&partial[row * kGroupN + col + 1], acc[j][2 * h + 1]);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < rows * kGroupN; e += kThreads) {
    const std::int64_t row = m0 + e / kGroupN, col = n0 + e % kGroupN;
    if (col >= n) continue;
    const float v = partial[e] * out_scale;
    const std::int64_t at = row * n + col;
    if (workspace != nullptr) {
      atomicAdd(workspace + at, v);
    } else {
      const float r =
          residual != nullptr ? __bfloat162float(__ushort_as_bfloat16(residual[at])) : 0;
      out[at] = __bfloat16_as_ushort(__float2bfloat16_rn(v + r));
    }
  }
  if (workspace == nullptr) return;

  // Split K: the last block to arrive at this output tile writes it out and re-zeroes it.
  unsigned* counters = reinterpret_cast<unsigned*>(workspace + m * n);
  unsigned* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
  if (!last_split_to_arrive(counter)) return;
  for (int e = threadIdx.x; e < rows * kGroupN; e += kThreads) {
    const std::int64_t row = m0 + e / kGroupN, col = n0 + e % kGroupN;
    if (col >= n) continue;
    float* cell = workspace + row * n + col;
    float v = __ldcg(cell);
    __stcg(cell, 0.0f);
    if (residual != nullptr) v += __bfloat162float(__ushort_as_bfloat16(residual[row * n + col]));
    out[row * n + col] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  if (threadIdx.x == 0) *counter = 0;
}

}  // namespace

cudaError_t w4a16_gemv_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                              const std::uint16_t* residual, std::uint16_t* out, int splits,
                              float* workspace, cudaStream_t stream, bool overlap) {
  const std::int64_t tiles_k = w.k_padded / 64;
  const int kt_per_split = whole_step_splits(tiles_k, &splits);
  const bool split = splits > 1;
  if (split && workspace == nullptr) return cudaErrorInvalidValue;
  // Once, before any stream capture: the opt-in to > 48 KB of shared memory.
  static const cudaError_t attribute_err =
      cudaFuncSetAttribute(w4a16_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attribute_err != cudaSuccess) return attribute_err;
  const dim3 grid(unsigned(w.n_padded / kGroupN), unsigned((m + kRows - 1) / kRows),
                  unsigned(splits));
  LaunchWithOverlap launch(grid, kThreads, kSmem, stream, overlap);
  const cudaError_t err =
      cudaLaunchKernelEx(&launch.config, w4a16_gemv_kernel, x, m, w.n, w.k, w.tiles, w.scales,
                         tiles_k, w4a16_strides(w), w.global_factor * 1024.0f, residual, out,
                         split ? workspace : nullptr, kt_per_split);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace nibble::kernels
