#pragma once
// The MoE down with the weighted combine (w4a16_grouped.h w4a16_grouped_down_combine, and _routed
// with ROUTE): grid row y is row block y of the routing table (ROUTE: of the block's own routing
// of the single token; its blocks route before waiting for the gate_up, whose logits were final
// before any gate_up block passed its wait), block x owns down rows [S::kRows x, S::kRows (x + 1));
// the expert rows go to expert_out as the grouped GEMM writes them, then the block that completes
// a token's k rows over its columns writes that token's combine.
#include <cstdint>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/w4a16_slice_epilogue.cuh"
#include "kernels/nvfp4/w4a16_slice_grouped_rows.cuh"

namespace nibble::kernels {
namespace {

// The block's work, every thread calling it: x, m, tiles, scales, out_scale and out as passed are
// replaced by the row block's (out: the whole expert_out [rows, n]). The one-launch MoE kernel
// (w4a16_moe_decode.cu) calls it with its own placement and hooks.
template <class S, int MT, bool ROUTE, class Order>
__device__ __forceinline__ void down_combine_block(
    const std::uint16_t* __restrict__ x, int m, std::int64_t n, std::int64_t k,
    const std::uint8_t* __restrict__ tiles, const std::uint8_t* __restrict__ scales,
    std::int64_t tiles_k, W4A16Strides strides, float out_scale,
    const std::uint16_t* __restrict__ residual, std::uint16_t* __restrict__ out,
    const MoeRowBlock* __restrict__ row_blocks, const W4A16DeviceWeight* __restrict__ table,
    const W4A16GroupedCombine& fuse_arg, SlicePlace place, const Order& order) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(128) std::uint8_t zeros[128];  // x rows past m, for ldmatrix
  std::int32_t row0 = 0, end, expert = 0;
  std::uint16_t* const out_all = out;
  W4A16GroupedCombine fuse = fuse_arg;  // the route's arrays in shared memory replace its own
  if (!grouped_rows<S, ROUTE, false>(row_blocks, table, fuse_arg, place, fuse, tiles, scales,
                                     out_scale, row0, end, &expert))
    return;
  x += std::int64_t(row0) * k;
  out += std::int64_t(row0) * n;
  m = end - row0;  // 1 .. 8 MT (the table's block_rows)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const SliceRing<S> ring(smem, m, warp);
  if (threadIdx.x < 8) reinterpret_cast<uint4*>(zeros)[threadIdx.x] = make_uint4(0, 0, 0, 0);
  const std::int64_t n0 = std::int64_t(place.x) * S::kRows;
  const SliceStart<S> start(n0, strides, tiles_k, warp);
  SliceLoader<S, false, MT, false> load(x, m, k, tiles, scales, strides, start.group_step0,
                                        start.tile0, 0, 0, ring.x_bytes, nullptr, 0, lane, warp);
  SliceAccumulators<S, MT> sums;
  slice_mainloop(load, ring, m, start.steps, zeros, order, sums);
  const SliceSums<S, MT> output(smem, sums, out_scale);
  if constexpr (S::kClampedSwiglu) {
    store_rows_with_bias(output, m, n0, n, fuse_arg.swiglu.down_bias + std::int64_t(expert) * n,
                         out);
  } else {
    store_rows(output, m, n0, n, residual, out);
  }
  __shared__ int last_tokens[kMaxRows];
  __shared__ int last_count;
  combine_tokens<S>(fuse, m, row0, n0, n, out_all, place, last_tokens, last_count);
}

// residual: null (the kernel keeps the dense form's argument list).
template <class S, int MT, bool ROUTE>
__global__ void __launch_bounds__(S::kThreads, (launch_min_blocks<S, MT>()))
    w4a16_down_combine_kernel(const std::uint16_t* __restrict__ x, int m, std::int64_t n,
                              std::int64_t k, const std::uint8_t* __restrict__ tiles,
                              const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                              W4A16Strides strides, float out_scale,
                              const std::uint16_t* __restrict__ residual,
                              std::uint16_t* __restrict__ out,
                              const MoeRowBlock* __restrict__ row_blocks,
                              const W4A16DeviceWeight* __restrict__ table,
                              W4A16GroupedCombine fuse_arg) {
  down_combine_block<S, MT, ROUTE>(
      x, m, n, k, tiles, scales, tiles_k, strides, out_scale, residual, out, row_blocks, table,
      fuse_arg, SlicePlace{blockIdx.x, blockIdx.y, gridDim.x}, AfterPreviousGrid{});
}

template <class S, int MT, bool ROUTE>
cudaError_t down_combine_attribute() {
  static const cudaError_t err =
      allow_all_block_smem(reinterpret_cast<const void*>(w4a16_down_combine_kernel<S, MT, ROUTE>));
  return err;
}

// n_padded / S::kRows slices of max_blocks row blocks; overlap: a dependent launch (the table
// and the weights it points to are read before waiting for the gate_up: the down's weights
// stream in under the gate_up's tail).
template <class S, int MT, bool ROUTE>
cudaError_t launch_down_combine(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                const MoeRowBlock* blocks, std::int64_t max_blocks,
                                std::uint16_t* out, cudaStream_t stream,
                                const W4A16GroupedCombine& fuse, bool overlap) {
  const W4A16DeviceWeight& shape = w.shape;
  return launch_grouped_form<S, MT>(
      w4a16_down_combine_kernel<S, MT, ROUTE>, down_combine_attribute<S, MT, ROUTE>(),
      shape.n_padded / S::kRows, max_blocks, stream, overlap, x, 8 * MT, shape.n, shape.k,
      shape.tiles, shape.scales, shape.k_padded / 64, w4a16_strides(shape), 1.0f,
      static_cast<const std::uint16_t*>(nullptr), out, blocks, w.table, fuse);
}

}  // namespace
}  // namespace nibble::kernels
