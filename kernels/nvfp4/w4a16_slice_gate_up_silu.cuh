#pragma once
// The MoE gate_up with the gather and SiLU * up (w4a16_grouped.h w4a16_grouped_gate_up_silu, and
// _routed with ROUTE): grid row y is row block y of the routing table (ROUTE: of the block's own
// routing of the single token), block x holds gate rows [16 x, 16 x + 16) (tiles 0, 1 of its
// slots) and the same up rows (tiles 2, 3, n / 2 further on), x row r is read at
// x[token[row0 + r]], and out [rows, n / 2] receives silu(gate) * up. It may start under the route
// (dependent launch): its table, tokens and weights all come from the route, so it waits first
// (the main loop's wait is then a no-op).
#include <cstdint>
#include <type_traits>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/w4a16_slice_epilogue.cuh"
#include "kernels/nvfp4/w4a16_slice_grouped_rows.cuh"

namespace nibble::kernels {
namespace {

// The block's work, every thread calling it: x, m, tiles, scales, out_scale and out as passed are
// replaced by the row block's. The one-launch MoE kernel (w4a16_moe_decode.cu) calls it with its
// own placement and hooks.
template <class S, int MT, bool ROUTE, class Order>
__device__ __forceinline__ void gate_up_silu_block(
    const std::uint16_t* __restrict__ x, int m, std::int64_t n, std::int64_t k,
    const std::uint8_t* __restrict__ tiles, const std::uint8_t* __restrict__ scales,
    std::int64_t tiles_k, W4A16Strides strides, float out_scale, std::uint16_t* __restrict__ out,
    const MoeRowBlock* __restrict__ row_blocks, const W4A16DeviceWeight* __restrict__ table,
    const W4A16GroupedCombine& fuse_arg, SlicePlace place, const Order& order) {
  static_assert(S::kTiles == 4, "a gate pair and an up pair");
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(128) std::uint8_t zeros[128];  // x rows past m, for ldmatrix
  std::int32_t row0 = 0, end, expert = 0;
  W4A16GroupedCombine fuse = fuse_arg;  // the route's arrays in shared memory replace its own
  order.wait();
  if (!grouped_rows<S, ROUTE, true>(row_blocks, table, fuse_arg, place, fuse, tiles, scales,
                                    out_scale, row0, end, &expert))
    return;
  out += std::int64_t(row0) * (n / 2);
  m = end - row0;  // 1 .. 8 MT (the table's block_rows)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const SliceRing<S> ring(smem, m, warp);
  if (threadIdx.x < 8) reinterpret_cast<uint4*>(zeros)[threadIdx.x] = make_uint4(0, 0, 0, 0);
  const std::int64_t n0 = std::int64_t(place.x) * 16;  // the block's first output column
  // Its weight rows: gate rows [n0, n0 + 16) and up rows n / 2 further on, or (clamped SwiGLU,
  // interleaved) the 32 rows from 2 n0, the "up pair" the second 16.
  const std::int64_t w0 = S::kClampedSwiglu ? 2 * n0 : n0;
  const SliceStart<S> start(w0, strides, tiles_k, warp);
  // The up pair's distance from the gate pair in group steps and tiles (up rows start at n / 2 or
  // 16 further, multiples of 16, so the pair never straddles a 128-row group).
  const std::int64_t up_row = S::kClampedSwiglu ? w0 + 16 : n / 2 + n0;
  const std::int64_t up_groups = (up_row / 128 - w0 / 128) * strides.group;
  const int up_tiles = int(up_row % 128) / 8 - start.tile0;
  SliceLoader<S, false, MT, true> load(x, m, k, tiles, scales, strides, start.group_step0,
                                       start.tile0, up_groups, up_tiles, ring.x_bytes, fuse.token,
                                       row0, lane, warp);
  SliceAccumulators<S, MT> sums;
  slice_mainloop(load, ring, m, start.steps, zeros, order, sums);
  const SliceSums<S, MT> output(smem, sums, out_scale);
  if constexpr (S::kClampedSwiglu) {
    store_clamped_swiglu(output, m, n0, n,
                         fuse_arg.swiglu.gate_up_bias + std::int64_t(expert) * n + w0,
                         fuse_arg.swiglu.alpha, fuse_arg.swiglu.limit, out);
  } else {
    store_silu_product(output, m, n0, n, out);
  }
}

// residual: null (the kernel keeps the dense form's argument list).
template <class S, int MT, bool ROUTE>
__global__ void __launch_bounds__(S::kThreads, (launch_min_blocks<S, MT>()))
    w4a16_gate_up_silu_kernel(const std::uint16_t* __restrict__ x, int m, std::int64_t n,
                              std::int64_t k, const std::uint8_t* __restrict__ tiles,
                              const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                              W4A16Strides strides, float out_scale,
                              const std::uint16_t* __restrict__ residual,
                              std::uint16_t* __restrict__ out,
                              const MoeRowBlock* __restrict__ row_blocks,
                              const W4A16DeviceWeight* __restrict__ table,
                              W4A16GroupedCombine fuse_arg) {
  (void)residual;
  gate_up_silu_block<S, MT, ROUTE>(
      x, m, n, k, tiles, scales, tiles_k, strides, out_scale, out, row_blocks, table, fuse_arg,
      SlicePlace{blockIdx.x, blockIdx.y, gridDim.x}, AfterPreviousGrid{});
}

template <class S, int MT, bool ROUTE>
cudaError_t gate_up_silu_attribute() {
  static const cudaError_t err =
      allow_all_block_smem(reinterpret_cast<const void*>(w4a16_gate_up_silu_kernel<S, MT, ROUTE>));
  return err;
}

// n / 2 / 16 slices of max_blocks row blocks; overlap: a dependent launch.
template <class S, int MT, bool ROUTE>
cudaError_t launch_gate_up_silu(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                const MoeRowBlock* blocks, std::int64_t max_blocks,
                                std::uint16_t* out, cudaStream_t stream,
                                const W4A16GroupedCombine& fuse, bool overlap) {
  const W4A16DeviceWeight& shape = w.shape;
  return launch_grouped_form<S, MT>(
      w4a16_gate_up_silu_kernel<S, MT, ROUTE>, gate_up_silu_attribute<S, MT, ROUTE>(),
      shape.n / 2 / 16, max_blocks, stream, overlap, x, 8 * MT, shape.n, shape.k, shape.tiles,
      shape.scales, shape.k_padded / 64, w4a16_strides(shape), 1.0f,
      static_cast<const std::uint16_t*>(nullptr), out, blocks, w.table, fuse);
}

}  // namespace
}  // namespace nibble::kernels
