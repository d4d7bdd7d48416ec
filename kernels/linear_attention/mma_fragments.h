#pragma once
// Where each lane of a warp points ldmatrix.x4 within a 16x16 BF16 tile, for the four ways the
// chunked delta-rule kernels (gated_deltanet_chunked.cu) keep operands in shared memory, and where
// an m16n8k16 accumulator element lies. Shared with tests/kernels/test_mma_fragments.cpp, which
// emulates ldmatrix and mma.sync on the CPU (the PTX ISA's fragment layouts) to check them.
#include "kernels/host_device.h"

namespace nibble::kernels {

struct TileOffset {
  int row = 0, col = 0;  // in the stored (row-major) array, from the tile's corner
};

// An A operand stored [m][k] (plain load): registers a0..a3 of mma m16n8k16.
NIBBLE_HOST_DEVICE inline TileOffset ldsm_a_mk(int lane) {
  return {lane % 16, (lane / 16) * 8};
}
// An A operand stored [k][m] (transposed load): A = the stored tile's transpose.
NIBBLE_HOST_DEVICE inline TileOffset ldsm_a_km(int lane) {
  return {lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8};
}
// A B operand stored [n][k] (plain load): registers 0, 1 the b0, b1 of columns 0..7, 2, 3 of
// columns 8..15.
NIBBLE_HOST_DEVICE inline TileOffset ldsm_b_nk(int lane) {
  return {lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8};
}
// A B operand stored [k][n] (transposed load): registers as ldsm_b_nk's.
NIBBLE_HOST_DEVICE inline TileOffset ldsm_b_kn(int lane) {
  return {lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8};
}
// Accumulator element e (0..3) of a lane: its row and column in the 16x8 tile.
NIBBLE_HOST_DEVICE inline TileOffset mma_c_at(int lane, int e) {
  return {lane / 4 + (e / 2) * 8, 2 * (lane % 4) + e % 2};
}

}  // namespace nibble::kernels
