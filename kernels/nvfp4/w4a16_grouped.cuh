#pragma once
// Device side of the grouped W4A16 launches (w4a16_grouped.h), shared by the slice and row-tile
// kernels: what the block of grid row blockIdx.y computes.
#include <cstdint>

#include "kernels/moe/moe_layout.h"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels::w4a16_detail {

struct GroupedBlock {
  std::int32_t row_begin, row_end;  // rows of x and out
  const std::uint8_t* tiles;        // the expert's weight
  const std::uint8_t* scales;
  float out_scale;  // its global factor, times the 2^10 of the FP4 decode (w4a16_device.cuh)
};

// False when the table's entry holds no expert: the block has nothing to do.
__device__ inline bool grouped_block(const MoeRowBlock* blocks, const W4A16DeviceWeight* table,
                                     GroupedBlock* out) {
  const MoeRowBlock rb = blocks[blockIdx.y];
  if (rb.expert < 0) return false;
  const W4A16DeviceWeight& w = table[rb.expert];
  *out = {rb.row_begin, rb.row_end, w.tiles, w.scales, w.global_factor * 1024.0f};
  return true;
}

}  // namespace nibble::kernels::w4a16_detail
