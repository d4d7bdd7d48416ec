#pragma once
// The grouped slice GEMM (w4a16_grouped.h w4a16_grouped_linear with a slice tile): grid row y is
// row block y of the routing table, its expert's weight slice b times those routed rows of x
// (already gathered), into the same rows of out. Not a dependent launch.
#include <cstdint>
#include <type_traits>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/w4a16_slice_epilogue.cuh"
#include "kernels/nvfp4/w4a16_slice_grouped_rows.cuh"

namespace nibble::kernels {
namespace {

// x, m, tiles, scales, out_scale and out as passed are replaced by the row block's; residual is
// null (the kernel keeps the dense form's argument list).
template <class S, int MT>
__global__ void __launch_bounds__(S::kThreads, (launch_min_blocks<S, MT>()))
    w4a16_grouped_slice_kernel(const std::uint16_t* __restrict__ x, int m, std::int64_t n,
                               std::int64_t k, const std::uint8_t* __restrict__ tiles,
                               const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                               W4A16Strides strides, float out_scale,
                               const std::uint16_t* __restrict__ residual,
                               std::uint16_t* __restrict__ out,
                               const MoeRowBlock* __restrict__ row_blocks,
                               const W4A16DeviceWeight* __restrict__ table) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(128) std::uint8_t zeros[128];  // x rows past m, for ldmatrix
  std::int32_t row0 = 0, end;
  if (!grouped_block(row_blocks, table, tiles, scales, out_scale, row0, end, blockIdx.y)) return;
  x += std::int64_t(row0) * k;
  out += std::int64_t(row0) * n;
  m = end - row0;  // 1 .. 8 MT (the table's block_rows)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const SliceRing<S> ring(smem, m, warp);
  if (threadIdx.x < 8) reinterpret_cast<uint4*>(zeros)[threadIdx.x] = make_uint4(0, 0, 0, 0);
  const std::int64_t n0 = std::int64_t(blockIdx.x) * S::kRows;
  const SliceStart<S> start(n0, strides, tiles_k, warp);
  SliceLoader<S, false, MT, false> load(x, m, k, tiles, scales, strides, start.group_step0,
                                        start.tile0, 0, 0, ring.x_bytes, nullptr, 0, lane, warp);
  SliceAccumulators<S, MT> sums;
  slice_mainloop(load, ring, m, start.steps, zeros, AfterPreviousGrid{}, sums);
  const SliceSums<S, MT> output(smem, sums, out_scale);
  store_rows(output, m, n0, n, residual, out);
}

template <class S, int MT>
cudaError_t grouped_slice_attribute() {
  static const cudaError_t err =
      allow_all_block_smem(reinterpret_cast<const void*>(w4a16_grouped_slice_kernel<S, MT>));
  return err;
}

// Grouped, up to 16 rows a block: the one- or two-fragment form.
template <class S>
cudaError_t launch_grouped_slice(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                 const MoeRowBlock* blocks, std::int64_t max_blocks, int block_rows,
                                 std::uint16_t* out, cudaStream_t stream) {
  const W4A16DeviceWeight& shape = w.shape;
  const auto launch = [&](auto fragments) {
    constexpr int MT = decltype(fragments)::value;
    return launch_grouped_form<S, MT>(
        w4a16_grouped_slice_kernel<S, MT>, grouped_slice_attribute<S, MT>(),
        shape.n_padded / S::kRows, max_blocks, stream, false, x, 8 * MT, shape.n, shape.k,
        shape.tiles, shape.scales, shape.k_padded / 64, w4a16_strides(shape), 1.0f,
        static_cast<const std::uint16_t*>(nullptr), out, blocks, w.table);
  };
  return block_rows > 8 ? launch(std::integral_constant<int, 2>{})
                        : launch(std::integral_constant<int, 1>{});
}

}  // namespace
}  // namespace nibble::kernels
