#pragma once
// Device side of the grouped W4A16 launches (w4a16_grouped.h), shared by the slice and row-tile
// kernels: what the block of grid row blockIdx.y computes.
#include <cstdint>

#include "kernels/moe/moe_layout.h"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels::w4a16_detail {

// The row block of grid row blockIdx.y: false when the table's entry holds no expert (the block
// has nothing to do); otherwise its rows [row_begin, row_end) of x and out, and its expert's weight
// and output scale (global factor times the 2^10 of the FP4 decode, w4a16_device.cuh) in place of
// the kernel's arguments.
// (row_block: the grid row, blockIdx.y unless a kernel places its blocks itself.)
__device__ inline bool grouped_block(const MoeRowBlock* blocks, const W4A16DeviceWeight* table,
                                     const std::uint8_t* __restrict__& tiles,
                                     const std::uint8_t* __restrict__& scales, float& out_scale,
                                     std::int32_t& row_begin, std::int32_t& row_end,
                                     unsigned row_block = blockIdx.y,
                                     std::int32_t* expert = nullptr) {
  const MoeRowBlock rb = blocks[row_block];
  if (rb.expert < 0) return false;
  if (expert != nullptr) *expert = rb.expert;
  const W4A16DeviceWeight& w = table[rb.expert];
  tiles = w.tiles;
  scales = w.scales;
  out_scale = w.global_factor * 1024.0f;
  row_begin = rb.row_begin;
  row_end = rb.row_end;
  return true;
}

}  // namespace nibble::kernels::w4a16_detail
