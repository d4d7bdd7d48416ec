#pragma once
// What the grouped slice forms share (w4a16_grouped.h), the rows of a block and the launch.
// A grouped slice block's rows: grid row place.y is row block place.y of the
// routing table, whose expert gives the weight, scale and routed rows [row0, end). ROUTE: the
// block routes the single token itself from the router's logits (W4A16GroupedRoute) instead of
// reading a routing launch's table, its arrays in shared memory taking the table's place in
// `fuse`; WRITE_ROUTE (the gate_up's): block (0, 0) also writes the routing's arrays and clears
// the combine's counts, as the route launch would.
#include <cstdint>

#include "kernels/moe/moe_route_device.cuh"
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_grouped.cuh"
#include "kernels/nvfp4/w4a16_grouped.h"
#include "kernels/nvfp4/w4a16_slice_common.cuh"

namespace nibble::kernels {
namespace {

// False where place.y is past the table's row blocks (the block has nothing to do).
template <class S, bool ROUTE, bool WRITE_ROUTE>
__device__ __forceinline__ bool grouped_rows(
    const MoeRowBlock* __restrict__ row_blocks, const W4A16DeviceWeight* __restrict__ table,
    const W4A16GroupedCombine& fuse_arg, SlicePlace place, W4A16GroupedCombine& fuse,
    const std::uint8_t* __restrict__& tiles, const std::uint8_t* __restrict__& scales,
    float& out_scale, std::int32_t& row0, std::int32_t& end, std::int32_t* expert = nullptr) {
  if constexpr (ROUTE) {
    // The token's routing from the logits, in this block (the gate_up after its wait; the down
    // before its wait: the logits were final before any gate_up block passed its own).
    __shared__ moe_device::SingleTokenRoute route_s;
    const W4A16GroupedRoute& route = fuse_arg.route;
    moe_device::route_single_token(route.logits, route.experts, route.k, route.scoring, route_s);
    if constexpr (WRITE_ROUTE) {
      if (place.x == 0 && place.y == 0) {
        moe_device::write_single_token_route(route_s, route.experts, route.k, route.out);
        for (int i = int(threadIdx.x); i < route.clear_count; i += S::kThreads) route.clear[i] = 0;
      }
    }
    row_blocks = route_s.blocks;
    fuse.token = route_s.token;
    fuse.source = route_s.source;
    fuse.weight = route_s.weight;
  }
  return grouped_block(row_blocks, table, tiles, scales, out_scale, row0, end, place.y, expert);
}

// Launches a grouped form: `slices` x max_blocks blocks of S, the slots sized for 8 MT rows (the
// table's block_rows), with the form's kernel arguments; attribute_err: the form's opt-in to all
// the shared memory a block may have (made once per kernel, before any capture).
template <class S, int MT, class... Params, class... Args>
cudaError_t launch_grouped_form(void (*kernel)(Params...), cudaError_t attribute_err,
                                std::int64_t slices, std::int64_t max_blocks, cudaStream_t stream,
                                bool overlap, Args... args) {
  static_assert(smem_bytes<S>(8 * MT) >= S::kWarps * MT * S::kPairs * 4 * 32 * 4,
                "the sums fit in the rings");
  if (attribute_err != cudaSuccess) return attribute_err;
  const dim3 grid{unsigned(slices), unsigned(max_blocks)};
  LaunchWithOverlap launch(grid, S::kThreads, smem_bytes<S>(8 * MT), stream, overlap);
  const cudaError_t err = cudaLaunchKernelEx(&launch.config, kernel, args...);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace
}  // namespace nibble::kernels
