#pragma once
// W4A16 slice kernels for decode and small batches, up to 16 rows of x (W4A16Tile::kSlice16 / 32 /
// 64 and their Wide forms): a block owns a thin slice of 16, 32 or 64 weight rows over the whole of
// K, so no K split crosses blocks. That removes what kM8's split-K costs after its last k step: the
// reds into the workspace, the fence, the arrival counter and the last block's re-read, a chain of
// L2 round trips paid once per kernel (~2.2 us per Llama layer at M = 1 on H100,
// kernels/nvfp4/PERF_NOTES.md v16).
//
// A block's 4 (Wide: 8) warps split K among themselves (warp w takes k steps w,
// w + warps, ...). Each streams through a private cp.async ring in shared memory (kDepth - 1 k
// steps in flight, __syncwarp between steps, no block barrier in the loop); their sums meet once
// in shared memory at the end.
// The weights are the swapped mma's A operand (two 8-row tiles as m16, as in kM8) and x its B
// operand (up to 8 rows as n8; 9 to 16 rows as two n8 fragments, MT = 2, each decoded weight
// fragment feeding both): each k step of a 16-row pair is 4 (MT = 2: 8) mma.sync. Every block
// reads all m rows of x over K, so x traffic from L2 per weight byte grows with m / slice rows:
// 9 to 16 rows want the 32- and 64-row slices.
//
// Ring slot (per warp, per k step), 128-byte aligned, in this order:
//   x       m rows x 64 columns, 128 B a row, chunk c of row r at (c ^ (r % 8)) * 16
//   codes   kTiles x 256 B (the layout's tiles of this k step, as stored)
//   scales  kTiles x 32 B
// ldmatrix rows of x past m read a 128-byte zero block instead, so a slot holds only real rows.
// The CPU reference is the layout's (nvfp4_ref.h dequantization, then the product in double):
// tests/gpu/test_nvfp4_gpu.cpp.
//
// The pieces, one concern a header, each kernel form a file of its own:
//   w4a16_slice_common.cuh    (this file) the block shapes, ring sizes, placement and the
//                             dependent-launch hooks;
//   w4a16_slice_loader.cuh    a warp's copies of a k step into its ring slot (codes, scales, x);
//   w4a16_slice_mainloop.cuh  the prologue, the wait, the ring loop and its mma.sync;
//   w4a16_slice_epilogue.cuh  the warps' sums meeting in shared memory, the row stores (residual
//                             add), the SiLU product and the MoE combine;
//   w4a16_slice_grouped_rows.cuh  a grouped block's rows (the routing table or its own route);
//   the forms: w4a16_slice_dense.cuh (the dense linear), w4a16_slice_grouped.cuh (the grouped
//   GEMM), w4a16_slice_gate_up_silu.cuh and w4a16_slice_down_combine.cuh (the MoE decode
//   fusions, w4a16_grouped.h).
// Included by w4a16_slice.cu (the shapes the planners pick, in nibble::kernels),
// w4a16_slice_dev.cu (the others, in nibble::kernels_dev) and w4a16_moe_decode.cu: everything here
// is in an unnamed namespace, so each includes its own copy of the templates and instantiates only
// what it launches.
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

constexpr int kMaxRows = 16;  // rows of x (MT = 2 fragments of the mma's n8)

template <int TILES, int WARPS, int DEPTH, int MIN_BLOCKS>
struct SliceShape {
  static constexpr int kWarps = WARPS, kThreads = 32 * WARPS;  // warps split K
  static constexpr int kTiles = TILES;                         // 8-row weight tiles per block
  static constexpr int kPairs = TILES / 2;
  static constexpr int kRows = TILES * 8;  // weight rows (output columns) per block
  static constexpr int kDepth = DEPTH;     // ring slots per warp
  static constexpr int kMinBlocks = MIN_BLOCKS;
  static constexpr int kCodeBytes = TILES * 256, kScaleBytes = TILES * 32;
  static constexpr nvfp4::W4A16Format kFormat = nvfp4::W4A16Format::kNvfp4;  // SliceMxfp4
  static constexpr bool kClampedSwiglu = false;                              // SliceClampedSwiglu
  static_assert(TILES == 2 || TILES == 4 || TILES == 8, "one, two or four m16 pairs of tiles");
};
// A slice shape for MXFP4 weights: the same kernel with the E8M0 scale decode.
template <class S>
struct SliceMxfp4 : S {
  static constexpr nvfp4::W4A16Format kFormat = nvfp4::W4A16Format::kMxfp4;
};
// f(S{}) for NVFP4 weights (the very kernels of before), f(SliceMxfp4<S>{}) for MXFP4.
template <class S, class F>
decltype(auto) with_slice_format(nvfp4::W4A16Format format, F&& f) {
  if (format == nvfp4::W4A16Format::kMxfp4) return f(SliceMxfp4<S>{});
  return f(S{});
}
// The MoE fusions for gpt-oss's experts (W4A16GroupedCombine::clamped_swiglu): interleaved
// gate_up rows, biases, the clamped SwiGLU.
template <class S>
struct SliceClampedSwiglu : S {
  static constexpr bool kClampedSwiglu = true;
};
// f of the fused MoE shape for the weights' format and the combine's activation.
template <class S, class F>
decltype(auto) with_expert_shape(nvfp4::W4A16Format format, bool clamped_swiglu, F&& f) {
  return with_slice_format<S>(format, [&](auto shape) {
    using Shape = decltype(shape);
    if (clamped_swiglu) return f(SliceClampedSwiglu<Shape>{});
    return f(Shape{});
  });
}
// Blocks per SM: qkv-sized layers need 3 of the 16-row blocks, gate_up 7 of the 32-row ones on
// H100's 132 SMs (nvfp4_linear.cpp picks the slice). The 8-warp forms are for <= 2 blocks per SM
// with a long K (down: 4 warps per block leave 8 warps and ~32 KB in flight per SM) or a grid
// smaller than the SM count. The 64-row slice (gate_up at 9..16 rows: 448 blocks) keeps 3 ring
// slots so that 4 blocks fit at 16 rows (52 KB each).
using Slice16 = SliceShape<2, 4, 8, 4>;
using Slice16Wide = SliceShape<2, 8, 8, 2>;
using Slice32 = SliceShape<4, 4, 4, 7>;
using Slice32Wide = SliceShape<4, 8, 4, 2>;
using Slice64 = SliceShape<8, 4, 3, 4>;
using Slice64Wide = SliceShape<8, 8, 3, 2>;
// The MoE decode fusions (w4a16_grouped.h), one wave at T = 1 for Qwen3-30B-A3B (8 active experts,
// 132 SMs): gate_up + SiLU, a block 16 gate + 16 up rows, 48 x 8 = 384 blocks of 36 KB of weights,
// every k step of a warp in flight at K = 2048 (8 slots); down + combine, 32 rows, 64 x 8 = 512
// blocks of 14 KB, K = 768's 3 steps per warp in flight (4 slots, 35 KB of shared memory: 4 blocks
// an SM fit with room to spare).
using SliceGateUpSilu = SliceShape<4, 4, 8, 3>;
using SliceDownCombine = SliceShape<4, 4, 4, 4>;

// f(Shape{}) for a slice tile.
template <class F>
decltype(auto) with_slice_shape(W4A16Tile tile, F&& f) {
  switch (tile) {
    case W4A16Tile::kSlice32:
      return f(Slice32{});
    case W4A16Tile::kSlice16Wide:
      return f(Slice16Wide{});
    case W4A16Tile::kSlice32Wide:
      return f(Slice32Wide{});
    case W4A16Tile::kSlice64:
      return f(Slice64{});
    case W4A16Tile::kSlice64Wide:
      return f(Slice64Wide{});
    default:
      return f(Slice16{});
  }
}

template <class S>
__host__ __device__ constexpr int slot_bytes(int m) {
  return (m * 128 + S::kCodeBytes + S::kScaleBytes + 127) / 128 * 128;
}
template <class S>
__host__ __device__ constexpr int smem_bytes(int m) {
  return S::kWarps * S::kDepth * slot_bytes<S>(m);
}

// With up to 3 rows of x, a k step's scales and x are at most 32 chunks of 16 bytes, so each lane
// copies its codes and at most one "side" chunk (a scale chunk or an x chunk): the loop issues
// fewer instructions than with separate scale and x copies (H100: 116 against 135 per k step of
// the 16-row slice, and M = 1 +overlap 48.7 -> 45.9 us over the Llama layer set, PERF_NOTES v19).
template <class S>
__host__ __device__ constexpr bool one_side_chunk(int m) {
  return S::kScaleBytes / 16 + 8 * m <= 32;
}

// Blocks per SM the register cap plans for: MT = 2 rings hold 9-16 rows of x, and shared memory
// (228 KB per SM on H100, the largest of the targets) fits fewer blocks than kMinBlocks.
template <class S, int MT>
__host__ __device__ constexpr int launch_min_blocks() {
  constexpr int kSmemPerSm = 233472, kReservedPerBlock = 1024;
  constexpr int fit = kSmemPerSm / (smem_bytes<S>(8 * MT) + kReservedPerBlock);
  return MT == 1 || S::kMinBlocks < fit ? S::kMinBlocks : (fit < 1 ? 1 : fit);
}

// Where a block of the slice kernel sits: slice x (its weight rows), grid row y (grouped: its row
// block) of a grid `slices` wide. The plain launch: blockIdx.x, blockIdx.y, gridDim.x; the
// one-launch MoE kernel (w4a16_moe_decode.cu) places its blocks itself.
struct SlicePlace {
  unsigned x, y, slices;
};
// The points where a block meets the kernel before it: weights_requested() once the prologue's
// weight copies are issued, wait() before the first read of what that kernel writes, allow()
// where the next kernel may start. A standalone launch waits for the previous grid (programmatic
// dependent launch); the one-launch MoE kernel (w4a16_moe_decode.cu) passes hooks of its own.
struct AfterPreviousGrid {
  __device__ void weights_requested() const {}
  __device__ void wait() const { wait_for_previous_grid(); }
  __device__ void allow() const { allow_next_grid(); }
};

}  // namespace
}  // namespace nibble::kernels
