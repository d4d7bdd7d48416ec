#pragma once
// W4A16 kernels: multi-stage pipeline of x tiles and repacked FP4 weight tiles into shared
// memory (TMA bulk copies for the 64- and 128-row tiles, cp.async for the small ones), FP4 -> BF16
// in registers (w4a16_device.cuh), mma.sync m16n8k16. See w4a16_gemm.h.
//
// Included by w4a16_gemm.cu (the tiles the planners pick, in nibble::kernels) and
// w4a16_gemm_dev.cu (the others, in nibble::kernels_dev): everything here is in an unnamed
// namespace, so each includes its own copy of the templates and instantiates only what it
// launches.
#include <atomic>

#include "kernels/nvfp4/even_spread.h"
#include "kernels/nvfp4/tma.cuh"
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"
#include "kernels/nvfp4/w4a16_grouped.cuh"
#include "kernels/nvfp4/w4a16_grouped.h"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

constexpr int kBk = 64;

// SWAP: x is the mma's B operand (MT fragments of 8 rows of x as n8) and the weights its A operand
// (two 8-row tiles as m16): half the mma.sync of the regular form when a block has at most 8
// rows; with 16 rows (MT = 2) the same count, but one decoded weight fragment serves both.
// KSPLIT = 2: two groups of WM x WN warps; a stage holds two k steps (one "sub-stage" each, in
// the one-step format) and group h computes sub-stage h; the groups' sums meet in shared memory
// at the end. Twice the warps per block without more split-K traffic.
template <int MT_, int NT_, int WM_, int WN_, int STAGES_, int MIN_BLOCKS_, bool SWAP_ = false,
          int KSPLIT_ = 1>
struct TileShape {
  static constexpr int MT = MT_, NT = NT_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr bool SWAP = SWAP_;
  static constexpr int KSPLIT = KSPLIT_;
  static constexpr int BM = SWAP ? 8 * MT : 16 * MT * WM, BN = 8 * NT * WN;
  static constexpr int GROUP_THREADS = 32 * WM * WN, THREADS = GROUP_THREADS * KSPLIT;
  static constexpr int ACC_N = SWAP ? NT / 2 : NT;  // accumulator fragments per m16 row tile
  static_assert(!SWAP || (MT <= 2 && WM == 1 && NT % 2 == 0), "SWAP: one or two row tiles of 8");
  static_assert(KSPLIT == 1 || (KSPLIT == 2 && !SWAP), "KSPLIT: 2, regular tiles only");
  static constexpr int A_BYTES = BM * kBk * 2;
  static constexpr int B_BYTES = (BN / 8) * 256;
  static constexpr int S_BYTES = (BN / 8) * 32;
  static constexpr int SUB_BYTES = A_BYTES + B_BYTES + S_BYTES;
  // Large tiles load through the TMA (tma.cuh): its 128-byte swizzle needs 1024-byte aligned
  // x tiles, so stages round up to 1 KB and the block asks for 1 KB of slack to align its base.
  static constexpr bool TMA = !SWAP && KSPLIT == 1 && BM >= 64;
  static constexpr int STAGE_BYTES = TMA ? (SUB_BYTES + 1023) / 1024 * 1024 : SUB_BYTES * KSPLIT;
  static constexpr int SUB_STRIDE = KSPLIT == 1 ? STAGE_BYTES : SUB_BYTES;  // between sub-stages
  static constexpr int SMEM = STAGE_BYTES * STAGES + (TMA ? 1024 : 0);
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;  // resident blocks per SM: caps registers
  static constexpr nvfp4::W4A16Format FORMAT = nvfp4::W4A16Format::kNvfp4;  // TileMxfp4
  static_assert(BN == kW4A16TileCols, "a block owns one 128-row weight group");
};
// A tile shape for MXFP4 weights: the same kernel with the E8M0 scale decode.
template <class S>
struct TileMxfp4 : S {
  static constexpr nvfp4::W4A16Format FORMAT = nvfp4::W4A16Format::kMxfp4;
};

// Warps split N first: a warp decodes each weight fragment once and reuses it over its MT
// row tiles, so WM > 1 pays the FP4 decode twice for the same block.
using ShapeM8 = TileShape<1, 4, 1, 4, 4, 8, true>;       // 8 x 128 swapped, 4 warps, 22 KB
using ShapeM16Swap = TileShape<2, 4, 1, 4, 4, 7, true>;  // 16 x 128 swapped, 4 warps, 26 KB
using ShapeM16 = TileShape<1, 4, 1, 4, 4, 8>;            // 16 x 128, 4 warps, 26 KB, 8 blocks/SM
using ShapeM16Wide = TileShape<1, 4, 1, 4, 4, 4, false, 2>;  // 16 x 128, 8 warps, 53 KB
using ShapeM64 = TileShape<4, 4, 1, 4, 4, 3>;                // 64 x 128, 4 warps, 53 KB
using ShapeM128 = TileShape<8, 4, 1, 4, 4, 2>;  // 128 x 128, 4 warps, 85 KB (GB10: <= 99 KB)

// Issues one k step of the pipeline with a fixed, precomputed set of 16-byte cp.async per
// thread (no per-step index arithmetic beyond a pointer bump): x rows [m0, m0 + BM) (`load_x`)
// and the 128-row weight group's 4 KB of tiles + 512 B of scales (`load_weights`).
template <class S>
struct StageLoader {
  // Each warp group's threads load their own sub-stage (k step kt_begin + KSPLIT * j + group).
  static constexpr int kThreads = S::GROUP_THREADS;
  static constexpr int kRowsPerPass = kThreads / 8;  // x rows covered by one chunk per thread
  static constexpr int kXPerThread = (S::BM + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr int kTilesPerThread = S::B_BYTES / 16 / kThreads;
  static_assert((S::BM % kRowsPerPass == 0 || S::BM < kRowsPerPass) &&
                    S::B_BYTES % (16 * kThreads) == 0 && S::S_BYTES / 16 <= kThreads,
                "the loader needs whole passes");

  // The next k step to load: x and weights advance separately (the prologue requests the
  // weights of several steps before their x).
  const std::uint16_t* x_next;  // this thread's first x chunk
  const std::uint8_t* w_next;   // this thread's 16 bytes of tiles
  const std::uint8_t* s_next;   // this thread's 16 bytes of scales (threads < S_BYTES / 16)
  std::int64_t x_pass_stride;   // elements between this thread's x chunks
  std::int64_t w_stride;        // bytes of tiles from one k step to the next
  int x_cols_left;              // columns of x left from this thread's chunk on (<= 0: past k)
  unsigned a_dst, w_dst;        // offsets in a stage
  bool s_loader;
  unsigned x_rows_mask;             // bit j: chunk j is a real row
  std::int64_t x_kt, w_kt, kt_end;  // KSPLIT > 1: the next k steps, to skip those past the range

  __device__ StageLoader(const std::uint16_t* x, std::int64_t k, std::int64_t m0, int rows,
                         std::int64_t kt_begin, const std::uint8_t* group_tiles,
                         const std::uint8_t* group_scales, std::int64_t kt_stride,
                         std::int64_t kt_end_) {
    const int group = threadIdx.x / kThreads, tid = threadIdx.x % kThreads;
    const int ch = tid % 8, first_row = tid / 8;
    kt_begin += group;
    x_kt = w_kt = kt_begin;
    kt_end = kt_end_;
    x_next = x + (m0 + first_row) * k + kt_begin * kBk + ch * 8;
    x_pass_stride = kRowsPerPass * k;
    x_cols_left = int(k - kt_begin * kBk - ch * 8);
    x_rows_mask = 0;
#pragma unroll
    for (int j = 0; j < kXPerThread; ++j) {
      if (first_row + j * kRowsPerPass < rows) x_rows_mask |= 1u << j;
    }
    // chunk ch of row r goes to chunk (ch ^ r%8) (r % 8 is the same in every pass): ldmatrix then
    // reads 8 rows of one chunk from 8 different bank groups.
    a_dst = unsigned(group * S::SUB_BYTES + first_row * 128 + ((ch ^ (first_row & 7)) * 16));
    w_stride = kt_stride * 4096;
    w_next = group_tiles + kt_begin * w_stride + tid * 16;
    s_next = group_scales + kt_begin * (kt_stride * 512) + tid * 16;
    w_dst = unsigned(group * S::SUB_BYTES + S::A_BYTES + tid * 16);
    s_loader = tid < S::S_BYTES / 16;
  }

  // x_any: any valid address of x, the source of the zero-filled copies past k.
  __device__ void load_x(std::uint8_t* stage, const std::uint16_t* x_any) {
    const bool col_ok = x_cols_left > 0;  // columns past k: zero-filled (source size 0)
    bool in_range = true;
    if constexpr (S::KSPLIT > 1) {
      in_range = x_kt < kt_end;
      x_kt += S::KSPLIT;
    }
#pragma unroll
    for (int j = 0; j < kXPerThread; ++j) {
      if (in_range && (x_rows_mask & (1u << j))) {
        cp_async16(stage + a_dst + j * kRowsPerPass * 128,
                   col_ok ? x_next + j * x_pass_stride : x_any, col_ok);
      }
    }
    x_next += S::KSPLIT * kBk;
    x_cols_left -= S::KSPLIT * kBk;
  }

  __device__ void load_weights(std::uint8_t* stage) {
    bool in_range = true;
    if constexpr (S::KSPLIT > 1) {
      in_range = w_kt < kt_end;
      w_kt += S::KSPLIT;
    }
    if (in_range) {
#pragma unroll
      for (int j = 0; j < kTilesPerThread; ++j) {
        cp_async16(stage + w_dst + j * kThreads * 16, w_next + j * kThreads * 16, true);
      }
      if (s_loader) cp_async16(stage + w_dst + S::B_BYTES, s_next, true);
    }
    w_next += S::KSPLIT * w_stride;
    s_next += S::KSPLIT * w_stride / 8;
  }
};

// The TMA form of the pipeline (S::TMA): thread 0 requests a stage as three bulk copies (x box,
// weight tiles, scales) that the stage's mbarrier counts in bytes; every thread waits on that
// barrier. x rows past m and columns past k arrive as zeros.
template <class S>
struct TmaStages {
  static constexpr unsigned kBytes = S::A_BYTES + S::B_BYTES + S::S_BYTES;
  unsigned bars, stages;       // shared addresses of the STAGES mbarriers and of stage 0
  const std::uint8_t* w_next;  // the next k step's weight tiles
  const std::uint8_t* s_next;  // and scales
  std::int64_t w_stride;       // bytes of tiles from one k step to the next
  int x_col, x_row;            // the next x box
  const CUtensorMap* x_map;

  // Thread 0 only. The weights need nothing from the previous kernel: they may go first.
  __device__ void request_weights(int st) {
    const unsigned bar = bars + 8 * st, dst = stages + unsigned(st * S::STAGE_BYTES);
    tma::mbarrier_arrive_expect_bytes(bar, kBytes);
    tma::copy_bytes(dst + S::A_BYTES, w_next, S::B_BYTES, bar);
    tma::copy_bytes(dst + S::A_BYTES + S::B_BYTES, s_next, S::S_BYTES, bar);
    w_next += w_stride;
    s_next += w_stride / 8;
  }
  __device__ void request_x(int st) {
    tma::copy_box_2d(stages + unsigned(st * S::STAGE_BYTES), x_map, x_col, x_row, bars + 8 * st);
    x_col += kBk;
  }
  // Stage st's use number i / STAGES has landed.
  __device__ void wait(int st, int i) const {
    tma::mbarrier_wait(bars + 8 * st, unsigned(i / S::STAGES) & 1u);
  }
};

// Split K: adds this block's partial sums into the workspace, 16 bytes per red: lanes 2u and
// 2u + 1 swap halves so that the even lane holds 4 columns of row g and the odd lane 4 columns
// of row g + 8.
template <class S>
__device__ inline void add_partial_sums(const float (&acc)[S::MT][S::NT][4], float* workspace,
                                        std::int64_t m, std::int64_t n, std::int64_t row0,
                                        std::int64_t col0, int lane, float out_scale) {
  const bool odd = lane & 1;
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < S::NT; ++nt) {
      const float* v = acc[mt][nt];
      const float r0 = __shfl_xor_sync(0xFFFFFFFFu, odd ? v[0] : v[2], 1);
      const float r1 = __shfl_xor_sync(0xFFFFFFFFu, odd ? v[1] : v[3], 1);
      const float q[4] = {odd ? r0 : v[0], odd ? r1 : v[1], odd ? v[2] : r0, odd ? v[3] : r1};
      const std::int64_t row = row0 + mt * 16 + lane / 4 + (odd ? 8 : 0);
      const std::int64_t col = col0 + nt * 8 + ((lane % 4) / 2) * 4;
      if (row >= m) continue;
      float* at = workspace + row * n + col;
      if (n % 4 == 0 && col + 3 < n) {
        atomicAdd(reinterpret_cast<float4*>(at), make_float4(q[0] * out_scale, q[1] * out_scale,
                                                             q[2] * out_scale, q[3] * out_scale));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (col + i < n) atomicAdd(at + i, q[i] * out_scale);
        }
      }
    }
  }
}

// Split K, the last block of an output tile: takes the summed tile from the workspace, leaves
// zeros there, adds the residual and writes BF16. A thread moves 4 columns per item and issues a
// batch's loads before its stores: one load -> store per element made each of a 16-row tile's
// 8-16 elements per thread wait a full L2 round trip.
template <class S>
__device__ inline void finish_split_tile(float* workspace, const std::uint16_t* residual,
                                         std::uint16_t* out, std::int64_t m, std::int64_t n,
                                         std::int64_t m0, std::int64_t n0) {
  // (Batches of 2 in the 64-register small tiles: 4 made ptxas spill kM16 on sm_120a.)
  constexpr int kItems = S::BM * S::BN / 4, kBatch = S::MT == 1 || S::SWAP ? 2 : 4;
  const bool vec = n % 4 == 0;  // then every item starts 16-byte aligned in the workspace
  const bool out8 = vec && (reinterpret_cast<std::uintptr_t>(out) & 7) == 0;
  for (int first = threadIdx.x; first < kItems; first += kBatch * S::THREADS) {
    float v[kBatch][4];
    std::int64_t at[kBatch];
    int cols[kBatch];  // columns of the item inside the output (0: none)
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int item = first + b * S::THREADS;
      const std::int64_t row = m0 + item / (S::BN / 4), col = n0 + (item % (S::BN / 4)) * 4;
      cols[b] = item < kItems && row < m && col < n ? int(n - col < 4 ? n - col : 4) : 0;
      at[b] = row * n + col;
      if (cols[b] == 4 && vec) {
        const float4 q = __ldcg(reinterpret_cast<const float4*>(workspace + at[b]));
        v[b][0] = q.x, v[b][1] = q.y, v[b][2] = q.z, v[b][3] = q.w;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[b][i] = i < cols[b] ? __ldcg(workspace + at[b] + i) : 0.0f;
      }
      if (residual != nullptr) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (i < cols[b]) v[b][i] += __bfloat162float(__ushort_as_bfloat16(residual[at[b] + i]));
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (cols[b] == 0) continue;
      std::uint16_t h[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) h[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v[b][i]));
      if (cols[b] == 4 && vec) {
        __stcg(reinterpret_cast<float4*>(workspace + at[b]), make_float4(0.0f, 0.0f, 0.0f, 0.0f));
      } else {
        for (int i = 0; i < cols[b]; ++i) __stcg(workspace + at[b] + i, 0.0f);
      }
      if (cols[b] == 4 && out8) {
        *reinterpret_cast<uint2*>(out + at[b]) =
            make_uint2(h[0] | (std::uint32_t(h[1]) << 16), h[2] | (std::uint32_t(h[3]) << 16));
      } else {
        for (int i = 0; i < cols[b]; ++i) out[at[b] + i] = h[i];
      }
    }
  }
}

// SWAP epilogue: c0,c1 of acc[mt] are x rows 8 mt + 2t, 8 mt + 2t + 1 of weight row g of tile 2p,
// c2,c3 the same of tile 2p + 1. The block's BM x 128 tile goes through shared memory (the
// pipeline is drained) so that rows leave as 16-byte stores or reds.
template <class S>
__device__ inline void store_swapped_tile(const float (&acc)[S::MT][S::ACC_N][4],
                                          std::uint8_t* smem, std::int64_t m, std::int64_t n,
                                          std::int64_t m0, std::int64_t n0, int wn, int lane,
                                          float out_scale, const std::uint16_t* residual,
                                          std::uint16_t* out, float* workspace) {
  static_assert(S::BM * S::BN * 4 <= S::SMEM, "the output tile fits in the stages");
  float* tile = reinterpret_cast<float*>(smem);  // [BM][BN]
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int p = 0; p < S::ACC_N; ++p) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = mt * 8 + (lane % 4) * 2 + (e & 1);
        const int c = (wn * S::NT + 2 * p + (e >> 1)) * 8 + lane / 4;
        tile[r * S::BN + c] = acc[mt][p][e] * out_scale;
      }
    }
  }
  __syncthreads();
  const int rows = int(m - m0 < S::BM ? m - m0 : S::BM);
  for (int idx = threadIdx.x; idx < rows * (S::BN / 4); idx += S::THREADS) {
    const int r = idx / (S::BN / 4), c = (idx % (S::BN / 4)) * 4;
    const std::int64_t row = m0 + r, col = n0 + c;
    const float4 v = *reinterpret_cast<const float4*>(tile + r * S::BN + c);
    const float q[4] = {v.x, v.y, v.z, v.w};
    float* at = workspace + row * n + col;
    if (workspace != nullptr && n % 4 == 0 && col + 3 < n) {
      atomicAdd(reinterpret_cast<float4*>(at), v);
      continue;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (col + i >= n) break;
      if (workspace != nullptr) {
        atomicAdd(at + i, q[i]);
      } else {
        const float res = residual != nullptr
                              ? __bfloat162float(__ushort_as_bfloat16(residual[row * n + col + i]))
                              : 0.0f;
        out[row * n + col + i] = __bfloat16_as_ushort(__float2bfloat16_rn(q[i] + res));
      }
    }
  }
}

// GROUPED (w4a16_grouped.h): grid row blockIdx.y computes rows [row_begin, row_end) of x and out
// with the weight and scale of row_blocks[blockIdx.y] (m, tiles, scales, out_scale as passed are
// replaced); no split-K.
template <class S, bool GROUPED = false>
__global__ void __launch_bounds__(S::THREADS, S::MIN_BLOCKS)
    w4a16_kernel(const std::uint16_t* __restrict__ x, std::int64_t m, std::int64_t n,
                 std::int64_t k, const std::uint8_t* __restrict__ tiles,
                 const std::uint8_t* __restrict__ scales, std::int64_t tiles_k,
                 W4A16Strides strides, float out_scale, const std::uint16_t* __restrict__ residual,
                 std::uint16_t* __restrict__ out, float* __restrict__ workspace, int kt_per_split,
                 const __grid_constant__ CUtensorMap x_map,
                 const MoeRowBlock* __restrict__ row_blocks,
                 const W4A16DeviceWeight* __restrict__ table) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  __shared__ __align__(8) std::uint64_t stage_full[S::TMA ? S::STAGES : 1];  // TMA barriers
  std::uint8_t* smem = smem_raw;
  if constexpr (S::TMA) smem += (1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kgroup = warp / (S::WM * S::WN), group_warp = warp % (S::WM * S::WN);
  const int wm = group_warp / S::WN, wn = group_warp % S::WN;
  // (The small-M tiles have one row tile; they skip the arithmetic and its registers.)
  const OutputTile tile =
      S::BM >= 64 && !GROUPED ? output_tile(kRasterBand) : OutputTile{blockIdx.y, blockIdx.x};
  std::int64_t m0 = std::int64_t(tile.row) * S::BM;
  if constexpr (GROUPED) {
    std::int32_t begin, end;
    if (!grouped_block(row_blocks, table, tiles, scales, out_scale, begin, end)) return;
    m0 = begin;
    m = end;  // rows past it (the next expert's, read by the TMA box) are not written
  }
  const std::int64_t n0 = std::int64_t(tile.col) * S::BN;
  const std::uint8_t* group_tiles = tiles + std::int64_t(tile.col) * strides.group * 4096;
  const std::uint8_t* group_scales = scales + std::int64_t(tile.col) * strides.group * 512;
  const std::int64_t kt_begin = std::int64_t(blockIdx.z) * kt_per_split;
  const std::int64_t kt_end = kt_begin + kt_per_split < tiles_k ? kt_begin + kt_per_split : tiles_k;
  const int nk = int(kt_end - kt_begin);
  const int n_stages = (nk + S::KSPLIT - 1) / S::KSPLIT;

  float acc[S::MT][S::ACC_N][4];
#pragma unroll
  for (int i = 0; i < S::MT; ++i)
#pragma unroll
    for (int j = 0; j < S::ACC_N; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // Rows of the x tile past m stay zero in every stage: zero them once, never load them.
  const int rows = int(m - m0 < S::BM ? m - m0 : S::BM);
  if (!S::TMA && rows < S::BM) {
    for (int sub = 0; sub < S::STAGES * S::KSPLIT; ++sub) {
      uint4* a_s = reinterpret_cast<uint4*>(smem + sub * S::SUB_STRIDE);
      for (int c = rows * 8 + threadIdx.x; c < S::BM * 8; c += S::THREADS) {
        a_s[c] = make_uint4(0, 0, 0, 0);
      }
    }
  }

  // Prologue: the weights need nothing from the previous kernel, so they are requested before
  // waiting for it (programmatic dependent launch). The next kernel may launch once every block
  // of this one has seen the previous finish: its blocks then fetch their first weights during
  // this kernel's main loop and tail, and at most two kernels of a chain overlap (an earlier
  // trigger lets a third take the SM slots this one's late blocks need).
  auto loader = [&] {
    if constexpr (S::TMA) {
      return TmaStages<S>{unsigned(__cvta_generic_to_shared(stage_full)),
                          unsigned(__cvta_generic_to_shared(smem)),
                          group_tiles + kt_begin * strides.kt * 4096,
                          group_scales + kt_begin * strides.kt * 512,
                          strides.kt * 4096,
                          int(kt_begin * kBk),
                          int(m0),
                          &x_map};
    } else {
      return StageLoader<S>(x, k, m0, rows, kt_begin, group_tiles, group_scales, strides.kt,
                            kt_end);
    }
  }();
  if constexpr (S::TMA) {
    if (threadIdx.x == 0) {
      for (int st = 0; st < S::STAGES; ++st) tma::mbarrier_init(loader.bars + 8 * st, 1);
      tma::fence_mbarrier_init();
      for (int st = 0; st < S::STAGES - 1 && st < n_stages; ++st) loader.request_weights(st);
    }
    __syncthreads();  // the barriers are initialized before anyone waits on them
    wait_for_previous_grid();
    allow_next_grid();
    if (threadIdx.x == 0) {
      for (int st = 0; st < S::STAGES - 1 && st < n_stages; ++st) loader.request_x(st);
    }
  } else {
    // Group 0 holds all the weights and x of stage 0; groups 1.. hold x of the later stages, so
    // wait_group below still sees stage i complete.
#pragma unroll
    for (int st = 0; st < S::STAGES - 1; ++st) {
      if (st < n_stages) loader.load_weights(smem + st * S::STAGE_BYTES);
    }
    wait_for_previous_grid();
    allow_next_grid();
#pragma unroll
    for (int st = 0; st < S::STAGES - 1; ++st) {
      if (st < n_stages) loader.load_x(smem + st * S::STAGE_BYTES, x);
      cp_async_commit();
    }
  }

  // Per-lane shared-memory offsets, fixed for the whole loop. ldmatrix row r (lane & 15) of
  // chunk 2 * step + lane / 16 sits at r * 128 + ((chunk ^ (r % 8)) * 16); as stage bases are
  // multiples of 128 that is (base + offset at step 0) ^ (step * 32).
  const unsigned smem_base = unsigned(__cvta_generic_to_shared(smem));
  // SWAP: ldmatrix matrix i = lane / 8 is chunk 4 * q + i of rows 0..7, i.e. the b fragments of
  // k16 steps 2q and 2q + 1: (row r = lane % 8 offset at q = 0) ^ (q * 64).
  const int a_row = S::SWAP ? (lane & 7) : wm * S::MT * 16 + (lane & 15);
  const int a_chunk = S::SWAP ? (lane >> 3) : (lane >> 4);
  const unsigned a_lane = unsigned(a_row * 128 + ((a_chunk ^ (a_row & 7)) * 16));
  const int b_lane = wn * S::NT * 256 + lane * 8;
  const int s_lane = wn * S::NT * 32 + (lane / 4) * 4;
  int read_stage = 0, write_stage = S::STAGES - 1;
  for (int i = 0; i < n_stages; ++i) {
    if constexpr (S::TMA) {
      loader.wait(read_stage, i);
      __syncthreads();  // every warp is done with the stage about to be overwritten
      if (threadIdx.x == 0 && i + S::STAGES - 1 < n_stages) {
        loader.request_weights(write_stage);
        loader.request_x(write_stage);
      }
    } else {
      cp_async_wait<S::STAGES - 2>();
      __syncthreads();
      if (i + S::STAGES - 1 < n_stages) {
        std::uint8_t* stage = smem + write_stage * S::STAGE_BYTES;
        loader.load_x(stage, x);
        loader.load_weights(stage);
      }
      cp_async_commit();
    }
    write_stage = write_stage + 1 == S::STAGES ? 0 : write_stage + 1;

    const int sub = read_stage * S::KSPLIT + kgroup;
    read_stage = read_stage + 1 == S::STAGES ? 0 : read_stage + 1;
    if (S::KSPLIT > 1 && i * S::KSPLIT + kgroup >= nk) continue;  // this group's step is past K
    const std::uint8_t* a_s = smem + sub * S::SUB_STRIDE;
    const unsigned a_addr = smem_base + unsigned(sub * S::SUB_STRIDE) + a_lane;
    const std::uint8_t* b_s = a_s + S::A_BYTES + b_lane;
    const std::uint8_t* s_s = a_s + S::A_BYTES + S::B_BYTES + s_lane;
    uint2 codes[S::NT];
    std::uint32_t scale01[S::NT], scale23[S::NT];
#pragma unroll
    for (int nt = 0; nt < S::NT; ++nt) {
      codes[nt] = *reinterpret_cast<const uint2*>(b_s + nt * 256);
      const std::uint32_t sc = *reinterpret_cast<const std::uint32_t*>(s_s + nt * 32);
      scale01[nt] = scales_to_bf16x2<S::FORMAT>(sc);
      scale23[nt] = scales_to_bf16x2<S::FORMAT>(sc >> 16);
    }
    if constexpr (S::SWAP) {
      // b fragments: [mt][q][2 * (step % 2) + half] for step 2q + step % 2 of x rows 8 mt..
      std::uint32_t xb[S::MT][2][4];
#pragma unroll
      for (int mt = 0; mt < S::MT; ++mt)
#pragma unroll
        for (int q = 0; q < 2; ++q)
          ldmatrix_x4_at(xb[mt][q], (a_addr + unsigned(mt * 8 * 128)) ^ unsigned(q * 64));
#pragma unroll
      for (int step = 0; step < 4; ++step) {
#pragma unroll
        for (int p = 0; p < S::ACC_N; ++p) {
          // A rows g and g + 8 are row g of tiles 2p and 2p + 1 (w4a16_layout.h: one lane, one
          // row).
          std::uint32_t a[4];
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const int nt = 2 * p + t;
            decode_fragment_pair(codes[nt], scale01[nt], scale23[nt], step, a[t], a[2 + t]);
          }
#pragma unroll
          for (int mt = 0; mt < S::MT; ++mt) {
            mma_bf16(acc[mt][p], a, xb[mt][step / 2][2 * (step % 2)],
                     xb[mt][step / 2][2 * (step % 2) + 1]);
          }
        }
      }
    } else {
#pragma unroll
      for (int step = 0; step < 4; ++step) {
        std::uint32_t a[S::MT][4];
#pragma unroll
        for (int mt = 0; mt < S::MT; ++mt) {
          ldmatrix_x4_at(a[mt], (a_addr + unsigned(mt * 16 * 128)) ^ unsigned(step * 32));
        }
#pragma unroll
        for (int nt = 0; nt < S::NT; ++nt) {
          std::uint32_t b0, b1;
          decode_fragment_pair(codes[nt], scale01[nt], scale23[nt], step, b0, b1);
#pragma unroll
          for (int mt = 0; mt < S::MT; ++mt) mma_bf16(acc[mt][nt], a[mt], b0, b1);
        }
      }
    }
  }

  if constexpr (S::KSPLIT > 1) {
    // Group 1's sums join group 0's through shared memory (the pipeline is drained).
    float* exchange = reinterpret_cast<float*>(smem);  // [group warp][MT][NT][4][32 lanes]
    cp_async_wait<0>();
    __syncthreads();
    if (kgroup == 1) {
#pragma unroll
      for (int mt = 0; mt < S::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < S::NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            exchange[(((group_warp * S::MT + mt) * S::NT + nt) * 4 + e) * 32 + lane] =
                acc[mt][nt][e];
    }
    __syncthreads();
    if (kgroup == 0) {
#pragma unroll
      for (int mt = 0; mt < S::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < S::NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[mt][nt][e] +=
                exchange[(((group_warp * S::MT + mt) * S::NT + nt) * 4 + e) * 32 + lane];
    }
  }

  // Epilogue: c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g+8 (group 0 only).
  if constexpr (S::SWAP) {
    store_swapped_tile<S>(acc, smem, m, n, m0, n0, wn, lane, out_scale, residual, out, workspace);
  } else if (kgroup > 0) {
    // group 1's sums were added to group 0's
  } else if (workspace != nullptr) {
    add_partial_sums<S>(acc, workspace, m, n, m0 + wm * S::MT * 16, n0 + wn * S::NT * 8, lane,
                        out_scale);
  } else {
    // Columns 2t, 2t + 1 leave as one 4-byte store when every row starts 4-byte aligned.
    const bool pairs_aligned = n % 2 == 0 && (reinterpret_cast<std::uintptr_t>(out) & 3) == 0;
#pragma unroll
    for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < S::NT; ++nt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const std::int64_t row = m0 + wm * S::MT * 16 + mt * 16 + lane / 4 + half * 8;
          const std::int64_t col = n0 + (wn * S::NT + nt) * 8 + (lane % 4) * 2;
          if (row >= m || col >= n) continue;
          const bool pair = col + 1 < n;
          const std::int64_t at = row * n + col;
          float r0 = acc[mt][nt][2 * half] * out_scale;
          float r1 = acc[mt][nt][2 * half + 1] * out_scale;
          if (residual != nullptr) {
            r0 += __bfloat162float(__ushort_as_bfloat16(residual[at]));
            if (pair) r1 += __bfloat162float(__ushort_as_bfloat16(residual[at + 1]));
          }
          const std::uint16_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(r0));
          const std::uint16_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(r1));
          if (pair && pairs_aligned) {
            *reinterpret_cast<std::uint32_t*>(out + at) = lo | (std::uint32_t(hi) << 16);
            continue;
          }
          out[at] = lo;
          if (pair) out[at + 1] = hi;
        }
      }
    }
  }
  if (workspace == nullptr) return;

  // Split K: the last block to arrive at this output tile writes it out and re-zeroes it.
  unsigned* counters = reinterpret_cast<unsigned*>(workspace + m * n);
  unsigned* counter = counters + tile.row * gridDim.x + tile.col;
  if (!last_split_to_arrive(counter)) return;
  finish_split_tile<S>(workspace, residual, out, m, n, m0, n0);
  if (threadIdx.x == 0) *counter = 0;
}

template <class S>
cudaError_t launch(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                   const std::uint16_t* residual, std::uint16_t* out, int splits, float* workspace,
                   cudaStream_t stream, bool overlap) {
  // The small tiles' grids take about one wave; under overlap their early blocks could crowd
  // some SMs (even_spread.h). The large tiles fill every slot: the plan declines overlap there.
  constexpr bool kSpread = S::BM <= 16;
  // Once per kernel, before any stream capture: the opt-in to > 48 KB of shared memory (to all a
  // block may have where the launch may ask for more than the tile needs).
  static const cudaError_t attribute_err = []() -> cudaError_t {
    if constexpr (kSpread) {
      return allow_all_block_smem(reinterpret_cast<const void*>(w4a16_kernel<S>));
    } else if constexpr (S::SMEM > 48 * 1024) {
      return cudaFuncSetAttribute(w4a16_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  S::SMEM);
    } else {
      return cudaSuccess;
    }
  }();
  if (attribute_err != cudaSuccess) return attribute_err;
  const std::int64_t tiles_k = w.k_padded / kBk;
  const int kt_per_split = whole_step_splits(tiles_k, &splits);
  const bool split = splits > 1;
  if (split && workspace == nullptr) return cudaErrorInvalidValue;
  const float out_scale = w.global_factor * 1024.0f;
  CUtensorMap x_map{};
  if constexpr (S::TMA) {
    const cudaError_t map_err = tma::cached_bf16_rows_map<S::BM>(&x_map, x, m, w.k);
    if (map_err != cudaSuccess) return map_err;
  }
  const dim3 grid(unsigned(w.n_padded / S::BN), unsigned((m + S::BM - 1) / S::BM),
                  unsigned(splits));
  int smem = S::SMEM;
  const cudaError_t smem_err =
      launch_smem(S::SMEM, std::int64_t(grid.x) * grid.y * grid.z, kSpread && overlap, &smem);
  if (smem_err != cudaSuccess) return smem_err;
  LaunchWithOverlap launch(grid, S::THREADS, smem, stream, overlap);
  const cudaError_t err = cudaLaunchKernelEx(
      &launch.config, w4a16_kernel<S>, x, m, w.n, w.k, w.tiles, w.scales, tiles_k, w4a16_strides(w),
      out_scale, residual, out, split ? workspace : nullptr, kt_per_split, x_map, nullptr, nullptr);
  return err != cudaSuccess ? err : cudaGetLastError();
}

// The opt-in to > 48 KB of shared memory, once per grouped kernel (w4a16_grouped_prepare runs it
// before any capture).
template <class S>
cudaError_t grouped_tile_attribute() {
  static const cudaError_t err = []() -> cudaError_t {
    if constexpr (S::SMEM > 48 * 1024) {
      return cudaFuncSetAttribute(w4a16_kernel<S, true>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
    } else {
      return cudaSuccess;
    }
  }();
  return err;
}

template <class S>
cudaError_t launch_grouped_tile(const std::uint16_t* x, std::int64_t rows,
                                const W4A16GroupedWeights& w, const MoeRowBlock* blocks,
                                std::int64_t max_blocks, std::uint16_t* out, cudaStream_t stream) {
  constexpr auto kernel = w4a16_kernel<S, true>;
  const cudaError_t attribute_err = grouped_tile_attribute<S>();
  if (attribute_err != cudaSuccess) return attribute_err;
  const W4A16DeviceWeight& shape = w.shape;
  const std::int64_t tiles_k = shape.k_padded / kBk;
  CUtensorMap x_map{};
  if constexpr (S::TMA) {
    const cudaError_t map_err = tma::cached_bf16_rows_map<S::BM>(&x_map, x, rows, shape.k);
    if (map_err != cudaSuccess) return map_err;
  }
  const dim3 grid(unsigned(shape.n_padded / S::BN), unsigned(max_blocks), 1);
  LaunchWithOverlap launch(grid, S::THREADS, S::SMEM, stream, false);
  const cudaError_t err = cudaLaunchKernelEx(
      &launch.config, kernel, x, rows, shape.n, shape.k, shape.tiles, shape.scales, tiles_k,
      w4a16_strides(shape), 1.0f, nullptr, out, nullptr, int(tiles_k), x_map, blocks, w.table);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <class S>
cudaError_t launch_grouped(const std::uint16_t* x, std::int64_t rows, const W4A16GroupedWeights& w,
                           const MoeRowBlock* blocks, std::int64_t max_blocks, std::uint16_t* out,
                           cudaStream_t stream) {
  // The 128-row tile's grouped form spills (255 registers, sm_90a): not built.
  if constexpr (S::BM > 64) {
    return cudaErrorInvalidValue;
  } else {
    return launch_grouped_tile<S>(x, rows, w, blocks, max_blocks, out, stream);
  }
}

// Calls f(Shape{}) with the tile family's TileShape; false for kGemv and the slice tiles, which
// have none.
template <class F>
bool with_tile_shape(W4A16Tile tile, F&& f) {
  switch (tile) {
    case W4A16Tile::kM8:
      return f(ShapeM8{}), true;
    case W4A16Tile::kM16Swap:
      return f(ShapeM16Swap{}), true;
    case W4A16Tile::kM16:
      return f(ShapeM16{}), true;
    case W4A16Tile::kM16Wide:
      return f(ShapeM16Wide{}), true;
    case W4A16Tile::kM64:
      return f(ShapeM64{}), true;
    case W4A16Tile::kM128:
      return f(ShapeM128{}), true;
    default:  // kGemv and the slices (w4a16_is_slice)
      return false;
  }
}

}  // namespace

}  // namespace nibble::kernels
