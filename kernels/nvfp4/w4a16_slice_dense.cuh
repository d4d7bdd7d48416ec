#pragma once
// The dense slice linear (w4a16_gemm.h w4a16_slice_linear): out[m, n] = x[m, k] . W^T
// (+ residual) for up to 16 rows of x, block b owning weight rows [S::kRows b, S::kRows (b + 1)).
// ONE_SIDE (up to 3 rows): each lane copies its codes and at most one scale or x chunk a k step;
// MT = 2: 9 to 16 rows as two x fragments. A dependent launch: the weights are requested before
// waiting for the previous kernel, and the next kernel is released right after that wait.
#include <cstdint>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/w4a16_slice_epilogue.cuh"

namespace nibble::kernels {
namespace {

template <class S, bool ONE_SIDE, int MT>
__global__ void __launch_bounds__(S::kThreads, (launch_min_blocks<S, MT>()))
    w4a16_slice_kernel(const std::uint16_t* __restrict__ x, int m, std::int64_t n, std::int64_t k,
                       const std::uint8_t* __restrict__ tiles,
                       const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                       W4A16Strides strides, float out_scale,
                       const std::uint16_t* __restrict__ residual,
                       std::uint16_t* __restrict__ out) {
  static_assert(!ONE_SIDE || MT == 1, "one side chunk: up to 3 rows of x");
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(128) std::uint8_t zeros[128];  // x rows past m, for ldmatrix
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const SliceRing<S> ring(smem, m, warp);
  if (threadIdx.x < 8) reinterpret_cast<uint4*>(zeros)[threadIdx.x] = make_uint4(0, 0, 0, 0);
  const std::int64_t n0 = std::int64_t(blockIdx.x) * S::kRows;
  const SliceStart<S> start(n0, strides, tiles_k, warp);
  SliceLoader<S, ONE_SIDE, MT, false> load(x, m, k, tiles, scales, strides, start.group_step0,
                                           start.tile0, 0, 0, ring.x_bytes, nullptr, 0, lane, warp);
  SliceAccumulators<S, MT> sums;
  slice_mainloop(load, ring, m, start.steps, zeros, AfterPreviousGrid{}, sums);
  const SliceSums<S, MT> output(smem, sums, out_scale);
  store_rows(output, m, n0, n, residual, out);
}

template <class S, bool ONE_SIDE, int MT>
cudaError_t launch_slice_kernel(const std::uint16_t* x, int rows, const W4A16DeviceWeight& w,
                                const std::uint16_t* residual, std::uint16_t* out,
                                cudaStream_t stream, bool overlap) {
  static_assert(smem_bytes<S>(8 * MT - 7) >= S::kWarps * MT * S::kPairs * 4 * 32 * 4,
                "the sums fit in the rings");
  constexpr auto kernel = w4a16_slice_kernel<S, ONE_SIDE, MT>;
  // Once per kernel, before any stream capture: the opt-in to all the shared memory a block may
  // have (under overlap the launch may ask for more than the kernel needs, even_spread.h).
  static const cudaError_t attribute_err =
      allow_all_block_smem(reinterpret_cast<const void*>(kernel));
  if (attribute_err != cudaSuccess) return attribute_err;
  const int blocks = int(w.n_padded / S::kRows);
  int smem = 0;
  cudaError_t err = launch_smem(smem_bytes<S>(rows), blocks, overlap, &smem);
  if (err != cudaSuccess) return err;
  LaunchWithOverlap launch(dim3(unsigned(blocks)), S::kThreads, smem, stream, overlap);
  err = cudaLaunchKernelEx(&launch.config, kernel, x, rows, w.n, w.k, w.tiles, w.scales,
                           w.k_padded / 64, w4a16_strides(w), w.global_factor * 1024.0f, residual,
                           out);
  return err != cudaSuccess ? err : cudaGetLastError();
}

// The kernel form for m rows of x (<= kMaxRows).
template <class S>
cudaError_t launch_slice(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, cudaStream_t stream,
                         bool overlap) {
  const int rows = int(m);
  if (rows > 8) {
    return launch_slice_kernel<S, false, 2>(x, rows, w, residual, out, stream, overlap);
  }
  return one_side_chunk<S>(rows)
             ? launch_slice_kernel<S, true, 1>(x, rows, w, residual, out, stream, overlap)
             : launch_slice_kernel<S, false, 1>(x, rows, w, residual, out, stream, overlap);
}

}  // namespace
}  // namespace nibble::kernels
