#pragma once
// Grouped W4A16 launches (mixture-of-experts experts): one launch multiplies many row ranges of x,
// each by its own weight of one uniform shape. A row-block table on the device (moe_layout.h)
// says, per block row of the grid, which weight (expert) and which rows of x [row_begin, row_end)
// it takes; entries with expert < 0 exit at once. The grid is fixed by the table's size, so the
// launch needs nothing from the host but the table's address (graph-capturable whatever the
// routing). Same tile code as the plain launches (w4a16_gemm.h): the slice kernels for blocks of
// up to 16 rows, the row-tile kernels of up to 64 rows (kM8 .. kM64; kM128's grouped form spills
// and is refused) for more. No split-K, no residual, no overlap
// (the table is written by the kernel before, read before the weights are fetched).
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/moe/moe_layout.h"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {

// The experts' weights: `table` a device array of W4A16DeviceWeight (one per expert, each with its
// own tiles, scales and global factor); `shape` a host copy of one of them whose n, k, n_padded,
// k_padded and k_major every entry shares (the caller checks that when building the table).
struct W4A16GroupedWeights {
  const W4A16DeviceWeight* table = nullptr;
  W4A16DeviceWeight shape;
};

// out[r, :] = x[r, :] . W_e^T for every row r of every row block (expert e); rows no block covers
// are not written. x: [rows, k] BF16 (rows = the table's routed rows: the TMA tiles read x through
// a tensor map of that many rows), out: [rows, n]. block_rows: the table's rows per block, <= 16
// for the slice tiles, <= the tile's rows (w4a16_tile_rows) for the row tiles. max_blocks <= 65535.
cudaError_t w4a16_grouped_linear(const std::uint16_t* x, std::int64_t rows,
                                 const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                 std::int64_t max_blocks, int block_rows, W4A16Tile tile,
                                 std::uint16_t* out, cudaStream_t stream);

// gpt-oss's expert (W4A16GroupedCombine::clamped_swiglu): its biases and activation constants.
struct W4A16ClampedSwiglu {
  const std::uint16_t* gate_up_bias = nullptr;  // [E, gate_up n] BF16, the weights' row order
  const std::uint16_t* down_bias = nullptr;     // [E, down n] BF16
  float alpha = 1.702f, limit = 7.0f;
};

// Decode fusions of the MoE layer (kernels/moe/moe_experts.h), slice kernels only, block_rows <=
// 16, the same per-output sums (4 warps, same k order) as w4a16_grouped_linear with kSlice16, so
// their results are bitwise those of the unfused launches:
//
// gate_up with the gather and SiLU * up: x row of routed row r is x[token[r], :] (no gathered
// copy), and a block holds 16 gate rows and the matching 16 up rows (gate_up: [2 I, K], gate rows
// first, I % 16 == 0), so it writes middle[r, i] = silu(g) * u ([rows, I]) with g and u rounded to
// BF16 first, as silu_mul_halves does. With clamped_swiglu (gpt-oss): gate_up's rows interleaved,
// the biases and the clamped SwiGLU (W4A16GroupedCombine::clamped_swiglu).
cudaError_t w4a16_grouped_gate_up_silu(const std::uint16_t* x, const std::int32_t* token,
                                       const W4A16GroupedWeights& gate_up,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, std::uint16_t* middle, cudaStream_t stream,
                                       bool overlap = true,
                                       const W4A16ClampedSwiglu* clamped_swiglu = nullptr);

// down with the weighted combine: the expert rows go to expert_out [rows, n] as by
// w4a16_grouped_linear; the block that finishes the last of token t's k rows over a column slice
// (an integer arrival count per (token, slice), so the order of arrival does not matter) writes
// out[t, c] = residual[t, c] + sum_j weight[t, j] * expert_out[source[t, j], c], j in order 0..k-1:
// the combine_experts formula, bitwise. arrivals: T * w4a16_grouped_combine_slices(n) zeros on
// entry, left zero (the block that brings a count to k clears it).
// A single token's routing computed by the fused launches' own blocks (T = 1, decode), in place
// of a routing launch and the table it writes: every block reads the router logits, takes the
// top k as moe_route does (kernels/moe/moe_route_device.cuh: the same experts, weights and rows,
// bitwise) and works on row block blockIdx.y = the blockIdx.y-th picked expert by id. The grid
// has k block rows. The gate_up's block (0, 0) also writes the routing's arrays (`out`, a
// MoeRouting of T = 1) and zeroes `clear` (the combine's arrival counts), as the route launch
// would.
struct W4A16GroupedRoute {
  const float* logits = nullptr;  // [1, experts] FP32; null: the launch reads its table
  int experts = 0;
  int k = 0;
  MoeScoring scoring;
  MoeRouting out;                 // gate_up only
  std::int32_t* clear = nullptr;  // gate_up only
  int clear_count = 0;
};

struct W4A16GroupedCombine {
  const std::int32_t* token = nullptr;      // [rows]: the token of each routed row
  const std::int32_t* source = nullptr;     // [T, k]
  const float* weight = nullptr;            // [T, k]
  const std::uint16_t* residual = nullptr;  // [T, n]
  std::uint16_t* out = nullptr;             // [T, n]
  std::int32_t* arrivals = nullptr;         // [T, w4a16_grouped_combine_slices(n)], zero
  int k = 0;
  W4A16GroupedRoute route;  // the routed launches below
  // gpt-oss's experts (every fused launch here and the one launch below): gate_up's rows
  // interleave gate and up as the checkpoint ships them (row 2i gate i, row 2i + 1 up i; a block
  // holds 32 consecutive rows), each expert adds its biases (BF16, rounded with the sums: g =
  // bf16(x . w_2i + b_2i), u likewise, expert_out = bf16(mid . down + b)), and the activation is
  // the clamped SwiGLU: g = min(g, limit), u = clamp(u, -limit, limit),
  // mid = bf16((u + 1) * g * sigmoid(alpha g)). A template of its own: the SiLU kernels are the
  // same code without it.
  bool clamped_swiglu = false;
  W4A16ClampedSwiglu swiglu;
};
std::int64_t w4a16_grouped_combine_slices(std::int64_t n);
cudaError_t w4a16_grouped_down_combine(const std::uint16_t* x, const W4A16GroupedWeights& down,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, const W4A16GroupedCombine& combine,
                                       std::uint16_t* expert_out, cudaStream_t stream,
                                       bool overlap = true);

// The two fused launches routing the single token themselves (W4A16GroupedRoute): gate_up with
// the gather and SiLU * up, then down with the combine, whose blocks route before waiting for the
// gate_up (the logits were final before any gate_up block passed its wait), so the down's weights
// still stream in under the gate_up's tail. The down must directly follow this gate_up on the
// stream. combine.token / source / weight are the route's (unused); k = route.k.
cudaError_t w4a16_grouped_gate_up_silu_routed(const std::uint16_t* x,
                                              const W4A16GroupedWeights& gate_up,
                                              const W4A16GroupedRoute& route, std::uint16_t* middle,
                                              cudaStream_t stream, bool overlap = true,
                                              const W4A16ClampedSwiglu* clamped_swiglu = nullptr);
cudaError_t w4a16_grouped_down_combine_routed(const std::uint16_t* x,
                                              const W4A16GroupedWeights& down,
                                              const W4A16GroupedCombine& combine,
                                              std::uint16_t* expert_out, cudaStream_t stream,
                                              bool overlap = true);

// The two routed launches above as one (w4a16_moe_decode.cu): block (x, r) routes the token, runs
// gate_up slice x of pick row r (x < n / 32), then down slice x of the same pick once all of that
// pick's gate_up slices have published their SiLU product (a counter, not a grid boundary), the
// combine included. The same output bits and routing arrays as the two launches. combine.route
// holds the routing, combine.arrivals the combine's counts (zeros on entry; the combine leaves
// them zero); gate_done: 2 k words, zeros on entry, left zero. cudaErrorNotSupported (nothing
// launched) where its blocks cannot all be resident at once on this device, or gate_up has more
// slices than down: take the two launches.
cudaError_t w4a16_grouped_experts_routed(const std::uint16_t* x, const W4A16GroupedWeights& gate_up,
                                         const W4A16GroupedWeights& down,
                                         const W4A16GroupedCombine& combine, std::uint16_t* middle,
                                         std::uint16_t* expert_out, std::int32_t* gate_done,
                                         cudaStream_t stream, bool overlap = true);
// When each block of the last one launch passed each phase, from the device's %globaltimer (ns),
// and the SM it ran on: recorded only by dev builds configured with -DNIBBLE_MOE_TIMELINE=ON
// (otherwise cudaErrorNotSupported). Blocks in grid order (x fastest); gate_slices of each row of
// `slices` run a gate_up slice. Synchronises the device.
struct MoeDecodeTimeline {
  enum Point {
    kEntry,
    kWaited,         // the router's logits are final
    kProbabilities,  // the routing's softmax (blocks routing the token themselves)
    kRanked,         // the routing's ranks
    kRouted,
    kGateUpDone,
    kDownWaitPassed,  // the pick's gate_up slices all done
    kDownDone,
    kPoints
  };
  std::vector<std::array<std::uint64_t, kPoints>> at;
  std::vector<int> sm;
  int slices = 0, rows = 0, gate_slices = 0;
};
cudaError_t w4a16_moe_decode_timeline(MoeDecodeTimeline* out);
// Reads the device's occupancy for it now (w4a16_grouped_prepare calls it, before any capture).
cudaError_t w4a16_grouped_experts_routed_prepare();

// Sets up every grouped kernel's launch attributes (shared memory opt-ins) now: call once before
// capturing launches into a CUDA graph, where a first launch would otherwise set them.
cudaError_t w4a16_grouped_prepare();

// The two halves of it, by tile kind (w4a16_slice.cu, w4a16_gemm.cu); arguments already checked.
cudaError_t w4a16_grouped_slice_linear(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, W4A16Tile tile, std::uint16_t* out,
                                       cudaStream_t stream);
cudaError_t w4a16_grouped_tile_linear(const std::uint16_t* x, std::int64_t rows,
                                      const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                      std::int64_t max_blocks, W4A16Tile tile, std::uint16_t* out,
                                      cudaStream_t stream);
cudaError_t w4a16_grouped_slice_prepare();

// The grouped forms the MoE planner never picks (moe_experts.h takes kSlice16 and kM64) live in
// nibble::kernels_dev (w4a16_dev_tiles.h), as the dense dev tiles do: w4a16_grouped_linear
// forwards them through this hook, cudaErrorNotSupported until w4a16_enable_dev_tiles() ran.
using W4A16DevGroupedLinear = cudaError_t (*)(const std::uint16_t* x, std::int64_t rows,
                                              const W4A16GroupedWeights& w,
                                              const MoeRowBlock* blocks, std::int64_t max_blocks,
                                              int block_rows, W4A16Tile tile, std::uint16_t* out,
                                              cudaStream_t stream);
cudaError_t w4a16_run_dev_grouped_linear(const std::uint16_t* x, std::int64_t rows,
                                         const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                         std::int64_t max_blocks, int block_rows, W4A16Tile tile,
                                         std::uint16_t* out, cudaStream_t stream);
void w4a16_set_dev_linear(W4A16DevLinear launcher, W4A16DevGroupedLinear grouped);

}  // namespace nibble::kernels
