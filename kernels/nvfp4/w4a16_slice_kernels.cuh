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
// Included by w4a16_slice.cu (the shapes the planners pick, in nibble::kernels) and
// w4a16_slice_dev.cu (the others, in nibble::kernels_dev): everything here is in an unnamed
// namespace, so each includes its own copy of the templates and instantiates only what it
// launches.

#include "kernels/moe/moe_route_device.cuh"
#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"
#include "kernels/nvfp4/w4a16_grouped.cuh"
#include "kernels/nvfp4/w4a16_grouped.h"

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
  static_assert(TILES == 2 || TILES == 4 || TILES == 8, "one, two or four m16 pairs of tiles");
};
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

// Grouped-only fusions (FUSE): the plain grouped GEMM, gate_up with the gather and SiLU * up, down
// with the combine (w4a16_grouped.h).
enum : int { kFuseNone = 0, kFuseGatherSilu = 8, kFuseCombine = 16 };
// With either MoE fusion: the block routes the single token itself (W4A16GroupedRoute) instead of
// reading a routing launch's table.
constexpr int kFuseRoute = 32;

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

// GROUPED (w4a16_grouped.h): grid row place.y takes its rows, weight and scale from
// row_blocks / table; x, m, out, tiles, scales and out_scale as passed are replaced.
// FUSE (grouped only): kFuseNone; kFuseGatherSilu (x row r read from x[fuse.token[row]], block x's
// slice is gate rows [16 x, 16 x + 16) (tiles 0, 1) and the same up rows (tiles 2, 3), out the SiLU
// product [rows, n / 2]) or kFuseCombine (the combine after the plain epilogue). The body of
// w4a16_slice_kernel, every thread of the block calling it.
template <class S, bool ONE_SIDE, int MT, bool GROUPED = false, int FUSE = 0,
          class Order = AfterPreviousGrid>
__device__ __forceinline__ void slice_block(
    const std::uint16_t* __restrict__ x, int m, std::int64_t n, std::int64_t k,
    const std::uint8_t* __restrict__ tiles, const std::uint8_t* __restrict__ scales,
    std::int64_t tiles_k, W4A16Strides strides, float out_scale,
    const std::uint16_t* __restrict__ residual, std::uint16_t* __restrict__ out,
    const MoeRowBlock* __restrict__ row_blocks, const W4A16DeviceWeight* __restrict__ table,
    const W4A16GroupedCombine& fuse_arg, SlicePlace place, const Order& order) {
  static_assert(!ONE_SIDE || MT == 1, "one side chunk: up to 3 rows of x");
  constexpr int kForm = FUSE & ~kFuseRoute;  // the MoE fusion, without the route bit
  constexpr bool kRouteHere = (FUSE & kFuseRoute) != 0;
  constexpr bool kMoeFusion = kForm == kFuseGatherSilu || kForm == kFuseCombine;
  static_assert(FUSE == kFuseNone || kMoeFusion, "the MoE fusions or none");
  static_assert(!kMoeFusion || (GROUPED && !ONE_SIDE), "the MoE fusions are grouped only");
  static_assert(kForm != kFuseGatherSilu || S::kTiles == 4, "a gate pair and an up pair");
  static_assert(!kRouteHere || kMoeFusion, "the route is the MoE fusions'");
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(128) std::uint8_t zeros[128];  // x rows past m, for ldmatrix
  std::int32_t row0 = 0;                              // grouped: the block's first routed row
  std::uint16_t* const out_all = out;
  W4A16GroupedCombine fuse = fuse_arg;  // the route's arrays in shared memory replace its own
  if constexpr (GROUPED) {
    // kFuseGatherSilu may start under the route (dependent launch): its table, tokens and weights
    // all come from the route, so it waits first (the later wait is then a no-op).
    if constexpr (kForm == kFuseGatherSilu) order.wait();
    if constexpr (kRouteHere) {
      // The token's routing from the logits, in this block (the gate_up after its wait; the down
      // before its wait: the logits were final before any gate_up block passed its own).
      __shared__ moe_device::SingleTokenRoute route_s;
      const W4A16GroupedRoute& route = fuse_arg.route;
      moe_device::route_single_token(route.logits, route.experts, route.k, route.norm_topk_prob,
                                     route_s);
      if constexpr (kForm == kFuseGatherSilu) {
        if (place.x == 0 && place.y == 0) {
          moe_device::write_single_token_route(route_s, route.experts, route.k, route.out);
          for (int i = int(threadIdx.x); i < route.clear_count; i += S::kThreads)
            route.clear[i] = 0;
        }
      }
      row_blocks = route_s.blocks;
      fuse.token = route_s.token;
      fuse.source = route_s.source;
      fuse.weight = route_s.weight;
    }
    std::int32_t end;
    if (!grouped_block(row_blocks, table, tiles, scales, out_scale, row0, end, place.y)) return;
    if constexpr (kForm != kFuseGatherSilu) x += std::int64_t(row0) * k;
    out += std::int64_t(row0) * (kForm == kFuseGatherSilu ? n / 2 : n);
    m = end - row0;  // 1 .. 8 MT (the table's block_rows)
  }
  constexpr int kAhead = S::kDepth - 1;  // k steps in flight per warp
  constexpr int kScaleChunks = S::kScaleBytes / 16;
  constexpr int kXPasses = 2 * MT;  // rows of x a lane copies (4 apart) without ONE_SIDE
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned slot_size = slot_bytes<S>(m), x_bytes = unsigned(m) * 128;
  const unsigned ring_bytes = S::kDepth * slot_size;
  const std::uint8_t* ring = smem + warp * ring_bytes;
  const unsigned ring_s = unsigned(__cvta_generic_to_shared(ring));
  if (threadIdx.x < 8) reinterpret_cast<uint4*>(zeros)[threadIdx.x] = make_uint4(0, 0, 0, 0);

  const std::int64_t n0 = std::int64_t(place.x) * (kForm == kFuseGatherSilu ? 16 : S::kRows);
  const std::int64_t group_step0 = (n0 / 128) * strides.group + warp * strides.kt;
  const int tile0 = int(n0 % 128) / 8;  // first tile of the slice inside its 128-row group
  // kFuseGatherSilu: the up pair's distance from the gate pair in group steps and tiles (up rows
  // start at n / 2, a multiple of 16, so the pair never straddles a 128-row group).
  std::int64_t up_groups = 0;
  int up_tiles = 0;
  if constexpr (kForm == kFuseGatherSilu) {
    const std::int64_t up_row = n / 2 + n0;
    up_groups = (up_row / 128 - n0 / 128) * strides.group;
    up_tiles = int(up_row % 128) / 8 - tile0;
  }
  const int steps = tiles_k > warp ? int((tiles_k - warp + S::kWarps - 1) / S::kWarps) : 0;

  // This lane's copies of a k step, at fixed offsets in a slot, from pointers bumped per step.
  // Codes: 1, 2 or 4 x 16 B, 512 B apart.
  const std::uint8_t* w_src = tiles + group_step0 * 4096 + tile0 * 256 + lane * 16;
  const std::int64_t w_step = S::kWarps * strides.kt * 4096;
  const unsigned code_dst = x_bytes + unsigned(lane) * 16;
  const std::int64_t up_code_jump = up_groups * 4096 + up_tiles * 256;  // from the gate pair
  auto load_codes = [&](unsigned slot) {
#pragma unroll
    for (int c = 0; c < S::kCodeBytes / 512; ++c) {
      if constexpr (kForm == kFuseGatherSilu) {
        cp_async16_to(slot + code_dst + c * 512, w_src + (c == 0 ? 0 : up_code_jump), 16);
      } else {
        cp_async16_to(slot + code_dst + c * 512, w_src + c * 512, 16);
      }
    }
    w_src += w_step;
  };
  // ONE_SIDE: side chunk `lane` of the step, scale chunks first, then x chunk c % 8 of row c / 8
  // (c = lane - scale chunks). Otherwise: scale chunk `lane` (lanes < scale chunks), and x chunk
  // lane % 8 of rows lane / 8 + 4j, j < kXPasses.
  const bool side_scale = lane < kScaleChunks;
  const int x_chunk = ONE_SIDE ? (side_scale ? 0 : lane - kScaleChunks) : lane;
  const int xc = x_chunk % 8, xr0 = x_chunk / 8;
  const bool x_real0 = (!ONE_SIDE || !side_scale) && xr0 < m;
  const std::uint8_t* s_src = scales + group_step0 * 512 + tile0 * 32 + lane * 16;
  // kFuseGatherSilu: scale chunks 4..7 are the up pair's (tiles 2, 3 of the slot).
  if (kForm == kFuseGatherSilu && lane >= 4) s_src += up_groups * 512 + up_tiles * 32 - 64;
  const std::uint16_t* x_src =
      x + (x_real0 && kForm != kFuseGatherSilu ? xr0 * k : 0) + warp * 64 + xc * 8;
  // kFuseGatherSilu: where row xr0 + 4 j of the block starts in x, from x_src (its token's row).
  // The table and the tokens are the routing's, written before this launch (no overlap).
  std::int64_t x_row_at[kForm == kFuseGatherSilu ? kXPasses : 1] = {};
  if constexpr (kForm == kFuseGatherSilu) {
#pragma unroll
    for (int j = 0; j < kXPasses; ++j)
      x_row_at[j] = xr0 + 4 * j < m ? std::int64_t(fuse.token[row0 + xr0 + 4 * j]) * k : 0;
  }
  const unsigned s_dst = x_bytes + S::kCodeBytes + unsigned(lane) * 16;
  // Row xr0 + 4j sits at x_dst0 + 512 j, its chunk swizzled by (xr0 + 4j) % 8: j odd flips
  // chunk bit 2 (xr0 < 4).
  const unsigned x_dst0 = unsigned(xr0 * 128 + ((xc ^ xr0) * 16));
  // ONE_SIDE: one pointer, step and offset for either kind of side chunk; a scale chunk is never
  // past k.
  const std::uint8_t* side_src = side_scale ? s_src : reinterpret_cast<const std::uint8_t*>(x_src);
  const std::int64_t side_step = side_scale ? w_step / 8 : S::kWarps * 64 * 2;
  const unsigned side_dst = side_scale ? s_dst : x_dst0;
  const bool side_on = side_scale || x_real0;
  int x_cols_left = side_scale && ONE_SIDE ? 1 << 30 : int(k - warp * 64 - xc * 8);  // <= 0: zero
  auto load_side = [&](unsigned slot) {
    cp_async16_to(slot + side_dst, side_src, x_cols_left > 0 ? 16 : 0);
    side_src += side_step;
    x_cols_left -= S::kWarps * 64;
  };
  auto load_scales = [&](unsigned slot) {
    if (side_scale) cp_async16_to(slot + s_dst, s_src, 16);
    s_src += w_step / 8;
  };
  auto load_x = [&](unsigned slot) {
    const unsigned bytes = x_cols_left > 0 ? 16 : 0;
#pragma unroll
    for (int j = 0; j < kXPasses; ++j) {
      if (xr0 + 4 * j < m) {
        const std::uint16_t* src = x_src + j * 4 * k;
        if constexpr (kForm == kFuseGatherSilu) src = x_src + x_row_at[j];
        cp_async16_to((slot + x_dst0 + unsigned(j * 512)) ^ unsigned((j & 1) * 64), src, bytes);
      }
    }
    x_src += S::kWarps * 64;
    x_cols_left -= S::kWarps * 64;
  };
  auto load_step = [&](unsigned slot) {
    load_codes(slot);
    if constexpr (ONE_SIDE) {
      if (side_on) load_side(slot);
    } else {
      load_scales(slot);
      load_x(slot);
    }
  };

  // Prologue: the weights need nothing from the previous kernel (programmatic dependent launch),
  // so they are requested before waiting for it; x after. One commit group per k step (the
  // first also holds the later steps' weights).
#pragma unroll
  for (int st = 0; st < kAhead; ++st) {
    if (st < steps) {
      load_codes(ring_s + st * slot_size);
      if constexpr (ONE_SIDE) {
        if (side_scale) load_side(ring_s + st * slot_size);
      } else {
        load_scales(ring_s + st * slot_size);
      }
    }
  }
  order.weights_requested();
  order.wait();
  // The next kernel may be scheduled once every block has passed here: its blocks take the SM
  // room this grid leaves and fetch their first weights during all of this kernel (releasing it
  // only once the copies are issued measured slower: PERF_NOTES, "Deleted forms").
  order.allow();
#pragma unroll
  for (int st = 0; st < kAhead; ++st) {
    if (st < steps) {
      if constexpr (ONE_SIDE) {
        if (x_real0) load_side(ring_s + st * slot_size);
      } else {
        load_x(ring_s + st * slot_size);
      }
    }
    cp_async_commit();
  }
  __syncthreads();  // the zero block is written

  // ldmatrix: matrix i = lane / 8 is chunk 4q + i of row 8 mt + r, r = lane % 8 (the b fragments
  // of k16 steps 2q, 2q + 1); (offset at q = 0) ^ (q * 64) as slots are 128-byte aligned. Rows
  // past m read the zero block, whatever the slot.
  const int xr = lane & 7, xi = lane >> 3;
  const unsigned x_swizzle = unsigned((xi ^ xr) * 16);
  unsigned x_base[MT], x_moves[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const bool real = 8 * mt + xr < m;
    const unsigned row_at = ring_s + unsigned((8 * mt + xr) * 128);
    x_base[mt] = real ? row_at + x_swizzle : unsigned(__cvta_generic_to_shared(zeros)) + x_swizzle;
    x_moves[mt] = real ? 1u : 0u;
  }
  const unsigned code_lane = x_bytes + unsigned(lane) * 8;
  const unsigned scale_lane = x_bytes + S::kCodeBytes + unsigned(lane / 4) * 4;

  // With one x fragment, two accumulators per pair (even and odd k16 steps) halve the chain of
  // dependent mma.sync; with two, the fragments' chains already interleave.
  constexpr int kSets = MT == 1 ? 2 : 1;
  float acc[kSets][MT][S::kPairs][4];
#pragma unroll
  for (int h = 0; h < kSets; ++h)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int p = 0; p < S::kPairs; ++p)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[h][mt][p][e] = 0.0f;

  // Slot i % kDepth is read at step i; the copies for step i + kAhead go to the slot read at step
  // i - 1 (its reads are over once every lane has passed the __syncwarp).
  // x_off: where the step's x is, from x_base (the slot offset).
  auto compute = [&](unsigned read_off, unsigned x_off) {
    const std::uint8_t* slot = ring + read_off;
    uint2 codes[S::kTiles];
    std::uint32_t scale01[S::kTiles], scale23[S::kTiles];
#pragma unroll
    for (int t = 0; t < S::kTiles; ++t) {
      codes[t] = *reinterpret_cast<const uint2*>(slot + code_lane + t * 256);
      const std::uint32_t sc = *reinterpret_cast<const std::uint32_t*>(slot + scale_lane + t * 32);
      scale01[t] = e4m3x2_to_scaled_bf16x2(sc);
      scale23[t] = e4m3x2_to_scaled_bf16x2(sc >> 16);
    }
    std::uint32_t xb[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const unsigned x_at = x_base[mt] + x_off * x_moves[mt];
#pragma unroll
      for (int q = 0; q < 2; ++q) ldmatrix_x4_at(xb[mt][q], x_at ^ unsigned(q * 64));
    }
#pragma unroll
    for (int step = 0; step < 4; ++step) {
#pragma unroll
      for (int p = 0; p < S::kPairs; ++p) {
        // A rows g and g + 8 are row g of tiles 2p and 2p + 1 (w4a16_layout.h).
        std::uint32_t a[4];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          decode_fragment_pair(codes[2 * p + t], scale01[2 * p + t], scale23[2 * p + t], step, a[t],
                               a[2 + t]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(acc[(step & 1) % kSets][mt][p], a, xb[mt][step / 2][2 * (step % 2)],
                   xb[mt][step / 2][2 * (step % 2) + 1]);
        }
      }
    }
  };
  unsigned read_off = 0, previous_off = kAhead * slot_size;
  auto next_slot = [&](unsigned off) {
    return off + slot_size == ring_bytes ? 0u : off + slot_size;
  };
  int i = 0;
  // Steps with copies to issue, then the last kAhead without (no per-step branch).
  for (; i < steps - kAhead; ++i) {
    cp_async_wait<kAhead - 1>();
    __syncwarp();  // every lane's copies of slot i have landed; slot i - 1 is no longer read
    load_step(ring_s + previous_off);
    cp_async_commit();
    compute(read_off, read_off);
    previous_off = read_off;
    read_off = next_slot(read_off);
  }
  for (; i < steps; ++i) {
    cp_async_wait<kAhead - 1>();
    __syncwarp();
    cp_async_commit();  // an empty group keeps wait_group's count
    compute(read_off, read_off);
    read_off = next_slot(read_off);
  }

  // The warps' sums meet in shared memory (the rings are drained): [warp][mt][pair][e][lane].
  cp_async_wait<0>();
  __syncthreads();
  float* partial = reinterpret_cast<float*>(smem);
  constexpr int kSums = MT * S::kPairs * 4;  // per lane and warp
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int p = 0; p < S::kPairs; ++p)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float sum = acc[0][mt][p][e];
        if constexpr (kSets == 2) sum += acc[1][mt][p][e];
        partial[((warp * MT + mt) * S::kPairs + p) * 128 + e * 32 + lane] = sum;
      }
  __syncthreads();
  // Output (x row r = 8 mt + rr, weight row j of the slice): c0, c1 of pair p hold row g of tile
  // 2p for x rows 2t, 2t + 1 of fragment mt; c2, c3 the same of tile 2p + 1 (lane = 4g + t).
  auto output = [&](int r, int j) {
    const int mt = r / 8, rr = r % 8, p = j / 16, within = j % 16;
    const int e = (within / 8) * 2 + (rr & 1), src_lane = (within % 8) * 4 + rr / 2;
    const float* sums = partial + (mt * S::kPairs + p) * 128 + e * 32 + src_lane;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < S::kWarps; ++w) sum += sums[w * kSums * 32];
    return sum * out_scale;
  };
  if constexpr (kForm == kFuseGatherSilu) {
    // Gate row j of the slice is slot row j, its up row slot row 16 + j; both rounded to BF16 as
    // the gate_up output would be, then silu_mul_halves' expression.
    auto rounded = [](float v) { return __bfloat162float(__float2bfloat16_rn(v)); };
    const std::int64_t width = n / 2;
    for (int idx = threadIdx.x; idx < m * 16; idx += S::kThreads) {
      const int r = idx / 16, j = idx % 16;
      const float g = rounded(output(r, j)), u = rounded(output(r, 16 + j));
      out[std::int64_t(r) * width + n0 + j] =
          __bfloat16_as_ushort(__float2bfloat16_rn(g / (1.0f + __expf(-g)) * u));
    }
  }
  {
    const int plain_rows = kForm == kFuseGatherSilu ? 0 : m;  // the SiLU product is written above
    for (int idx = threadIdx.x; idx < plain_rows * S::kRows; idx += S::kThreads) {
      const int r = idx / S::kRows, j = idx % S::kRows;
      const std::int64_t col = n0 + j;
      if (col >= n) continue;
      float sum = output(r, j);
      const std::int64_t at = std::int64_t(r) * n + col;
      if (residual != nullptr) sum += __bfloat162float(__ushort_as_bfloat16(residual[at]));
      out[at] = __bfloat16_as_ushort(__float2bfloat16_rn(sum));
    }
  }
  if constexpr (kForm == kFuseCombine) {
    // The block's expert rows are out; each of its tokens counts one more of its k rows done over
    // this column slice. The block that brings a count to k combines that token's slice: every
    // other row of it was written and fenced before its count went up.
    __shared__ int last_tokens[kMaxRows];
    __shared__ int last_count;
    if (threadIdx.x == 0) last_count = 0;
    __threadfence();
    __syncthreads();
    if (threadIdx.x < m) {
      const int t = fuse.token[row0 + threadIdx.x];
      std::int32_t* const count = fuse.arrivals + std::int64_t(t) * place.slices + place.x;
      if (atomicAdd(count, 1) == fuse.k - 1) {
        // The last of the k arrivals: no other block touches the count again, so it goes back to
        // zero for the next layer (the one-launch MoE kernel needs zeros on entry).
        *count = 0;
        __threadfence();
        last_tokens[atomicAdd(&last_count, 1)] = t;
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < last_count * S::kRows; idx += S::kThreads) {
      const int t = last_tokens[idx / S::kRows];
      const std::int64_t col = n0 + idx % S::kRows;
      if (col >= n) continue;
      // combine_experts' expression and order (kernels/layer/layer_ops.cu).
      float v = 0.0f;
      for (int j = 0; j < fuse.k; ++j) {
        const std::int64_t row = fuse.source[t * fuse.k + j];
        v += fuse.weight[t * fuse.k + j] *
             __bfloat162float(__ushort_as_bfloat16(__ldcg(out_all + row * n + col)));
      }
      const std::int64_t at = std::int64_t(t) * n + col;
      fuse.out[at] = __bfloat16_as_ushort(
          __float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(fuse.residual[at])) + v));
    }
  }
}

template <class S, bool ONE_SIDE, int MT, bool GROUPED = false, int FUSE = 0>
__global__ void __launch_bounds__(S::kThreads, (launch_min_blocks<S, MT>()))
    w4a16_slice_kernel(const std::uint16_t* __restrict__ x, int m, std::int64_t n, std::int64_t k,
                       const std::uint8_t* __restrict__ tiles,
                       const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                       W4A16Strides strides, float out_scale,
                       const std::uint16_t* __restrict__ residual, std::uint16_t* __restrict__ out,
                       const MoeRowBlock* __restrict__ row_blocks,
                       const W4A16DeviceWeight* __restrict__ table, W4A16GroupedCombine fuse_arg) {
  slice_block<S, ONE_SIDE, MT, GROUPED, FUSE>(
      x, m, n, k, tiles, scales, tiles_k, strides, out_scale, residual, out, row_blocks, table,
      fuse_arg, SlicePlace{blockIdx.x, blockIdx.y, gridDim.x}, AfterPreviousGrid{});
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
                           out, nullptr, nullptr, W4A16GroupedCombine{});
  return err != cudaSuccess ? err : cudaGetLastError();
}

// The opt-in to all the shared memory a block may have, once per grouped kernel
// (w4a16_grouped_prepare runs it before any capture).
template <class S, int MT, int FUSE = kFuseNone>
cudaError_t grouped_slice_attribute() {
  static const cudaError_t err = allow_all_block_smem(
      reinterpret_cast<const void*>(w4a16_slice_kernel<S, false, MT, true, FUSE>));
  return err;
}

// Grouped: rows per block up to 8 MT, the slots sized for 8 MT rows. kFuseGatherSilu's blocks
// cover 16 gate rows each (n / 2 of them in all).
template <class S, int MT, int FUSE = kFuseNone>
cudaError_t launch_grouped_slice_kernel(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                        const MoeRowBlock* blocks, std::int64_t max_blocks,
                                        std::uint16_t* out, cudaStream_t stream,
                                        const W4A16GroupedCombine& fuse = {},
                                        bool overlap = false) {
  static_assert(smem_bytes<S>(8 * MT) >= S::kWarps * MT * S::kPairs * 4 * 32 * 4,
                "the sums fit in the rings");
  constexpr auto kernel = w4a16_slice_kernel<S, false, MT, true, FUSE>;
  const cudaError_t attribute_err = grouped_slice_attribute<S, MT, FUSE>();
  if (attribute_err != cudaSuccess) return attribute_err;
  const W4A16DeviceWeight& shape = w.shape;
  const std::int64_t slices =
      (FUSE & ~kFuseRoute) == kFuseGatherSilu ? shape.n / 2 / 16 : shape.n_padded / S::kRows;
  const dim3 grid{unsigned(slices), unsigned(max_blocks)};
  // Programmatic dependent launch for the fusions: kFuseGatherSilu's blocks are scheduled under
  // the route and wait for it before reading anything; kFuseCombine follows the gate_up, whose
  // blocks all started after the route finished (their wait), so the table and the weights it
  // points to may be read before waiting for the gate_up: the down's weights stream in under the
  // gate_up's tail. (The plain grouped GEMM never overlaps.)
  LaunchWithOverlap launch(grid, S::kThreads, smem_bytes<S>(8 * MT), stream,
                           FUSE != kFuseNone && overlap);
  const cudaError_t err = cudaLaunchKernelEx(
      &launch.config, kernel, x, 8 * MT, shape.n, shape.k, shape.tiles, shape.scales,
      shape.k_padded / 64, w4a16_strides(shape), 1.0f, nullptr, out, blocks, w.table, fuse);
  return err != cudaSuccess ? err : cudaGetLastError();
}

// Grouped, up to 16 rows a block: the one- or two-fragment form.
template <class S>
cudaError_t launch_grouped_slice(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                 const MoeRowBlock* blocks, std::int64_t max_blocks, int block_rows,
                                 std::uint16_t* out, cudaStream_t stream) {
  return block_rows > 8 ? launch_grouped_slice_kernel<S, 2>(x, w, blocks, max_blocks, out, stream)
                        : launch_grouped_slice_kernel<S, 1>(x, w, blocks, max_blocks, out, stream);
}

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
