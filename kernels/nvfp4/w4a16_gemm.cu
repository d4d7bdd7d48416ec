// W4A16 kernels: cp.async multi-stage pipeline of x tiles and repacked FP4 weight tiles into
// shared memory, FP4 -> BF16 in registers (w4a16_device.cuh), mma.sync m16n8k16. See
// w4a16_gemm.h.
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

constexpr int kBk = 64;

template <int MT_, int NT_, int WM_, int WN_, int STAGES_, int MIN_BLOCKS_>
struct TileShape {
  static constexpr int MT = MT_, NT = NT_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int BM = 16 * MT * WM, BN = 8 * NT * WN, THREADS = 32 * WM * WN;
  static constexpr int A_BYTES = BM * kBk * 2;
  static constexpr int B_BYTES = (BN / 8) * 256;
  static constexpr int S_BYTES = (BN / 8) * 32;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + S_BYTES;
  static constexpr int SMEM = STAGE_BYTES * STAGES;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;  // resident blocks per SM: caps registers
  static_assert(BN == kW4A16TileCols, "a block owns one 128-row weight group");
};

// Warps split N first: a warp decodes each weight fragment once and reuses it over its MT
// row tiles, so WM > 1 pays the FP4 decode twice for the same block.
using ShapeM16 = TileShape<1, 4, 1, 4, 4, 8>;   // 16 x 128, 4 warps, 26 KB, 8 blocks/SM
using ShapeM64 = TileShape<4, 4, 1, 4, 4, 3>;   // 64 x 128, 4 warps, 50 KB
using ShapeM128 = TileShape<8, 4, 1, 4, 4, 2>;  // 128 x 128, 4 warps, 82 KB (GB10: <= 99 KB)

// One k step of the pipeline: x rows [m0, m0 + BM) and the 128-row weight group's tiles and
// scales (contiguous: 4 KB + 512 B, see w4a16_layout.h).
template <class S>
__device__ inline void load_stage(std::uint8_t* stage, const std::uint16_t* __restrict__ x,
                                  int rows, std::int64_t k, std::int64_t m0, std::int64_t kt,
                                  const std::uint8_t* __restrict__ group_tiles,
                                  const std::uint8_t* __restrict__ group_scales) {
  std::uint8_t* a_s = stage;
  std::uint8_t* b_s = stage + S::A_BYTES;
  std::uint8_t* s_s = b_s + S::B_BYTES;
  // x: `rows` real rows (the rest of the tile was zeroed once) x 8 chunks of 16 bytes; chunk
  // ch of row r goes to chunk (ch ^ r%8): ldmatrix then reads 8 rows of one chunk from 8
  // different bank groups.
  const std::uint16_t* x_tile = x + m0 * k + kt * kBk;
  const std::int64_t cols_left = k - kt * kBk;
  for (int c = threadIdx.x; c < rows * 8; c += S::THREADS) {
    const int r = c / 8, ch = c % 8;
    const bool valid = ch * 8 < cols_left;
    cp_async16(a_s + r * 128 + ((ch ^ (r & 7)) * 16), valid ? x_tile + r * k + ch * 8 : x, valid);
  }
  const std::uint8_t* t_src = group_tiles + kt * (kW4A16TileCols / 8) * 256;
  for (int c = threadIdx.x; c < S::B_BYTES / 16; c += S::THREADS) {
    cp_async16(b_s + c * 16, t_src + c * 16, true);
  }
  const std::uint8_t* s_src = group_scales + kt * (kW4A16TileCols / 8) * 32;
  for (int c = threadIdx.x; c < S::S_BYTES / 16; c += S::THREADS) {
    cp_async16(s_s + c * 16, s_src + c * 16, true);
  }
}

template <class S>
__global__ void __launch_bounds__(S::THREADS, S::MIN_BLOCKS)
    w4a16_kernel(const std::uint16_t* __restrict__ x, std::int64_t m, std::int64_t n,
                 std::int64_t k, const std::uint8_t* __restrict__ tiles,
                 const std::uint8_t* __restrict__ scales, std::int64_t tiles_k, float out_scale,
                 const std::uint16_t* __restrict__ residual, std::uint16_t* __restrict__ out,
                 float* __restrict__ workspace, int kt_per_split) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / S::WN, wn = warp % S::WN;
  const std::int64_t m0 = std::int64_t(blockIdx.y) * S::BM;
  const std::int64_t n0 = std::int64_t(blockIdx.x) * S::BN;
  const std::uint8_t* group_tiles = tiles + std::int64_t(blockIdx.x) * tiles_k * (S::BN / 8) * 256;
  const std::uint8_t* group_scales = scales + std::int64_t(blockIdx.x) * tiles_k * (S::BN / 8) * 32;
  const std::int64_t kt_begin = std::int64_t(blockIdx.z) * kt_per_split;
  const std::int64_t kt_end = kt_begin + kt_per_split < tiles_k ? kt_begin + kt_per_split : tiles_k;
  const int nk = int(kt_end - kt_begin);

  float acc[S::MT][S::NT][4];
#pragma unroll
  for (int i = 0; i < S::MT; ++i)
#pragma unroll
    for (int j = 0; j < S::NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // Rows of the x tile past m stay zero in every stage: zero them once, never load them.
  const int rows = int(m - m0 < S::BM ? m - m0 : S::BM);
  if (rows < S::BM) {
    for (int st = 0; st < S::STAGES; ++st) {
      uint4* a_s = reinterpret_cast<uint4*>(smem + st * S::STAGE_BYTES);
      for (int c = rows * 8 + threadIdx.x; c < S::BM * 8; c += S::THREADS) {
        a_s[c] = make_uint4(0, 0, 0, 0);
      }
    }
  }

#pragma unroll
  for (int st = 0; st < S::STAGES - 1; ++st) {
    if (st < nk) {
      load_stage<S>(smem + st * S::STAGE_BYTES, x, rows, k, m0, kt_begin + st, group_tiles,
                    group_scales);
    }
    cp_async_commit();
  }

  for (int i = 0; i < nk; ++i) {
    cp_async_wait<S::STAGES - 2>();
    __syncthreads();
    const int next = i + S::STAGES - 1;
    if (next < nk) {
      load_stage<S>(smem + (next % S::STAGES) * S::STAGE_BYTES, x, rows, k, m0, kt_begin + next,
                    group_tiles, group_scales);
    }
    cp_async_commit();

    const std::uint8_t* a_s = smem + (i % S::STAGES) * S::STAGE_BYTES;
    const std::uint8_t* b_s = a_s + S::A_BYTES;
    const std::uint8_t* s_s = b_s + S::B_BYTES;
    uint2 codes[S::NT];
    std::uint32_t scale01[S::NT], scale23[S::NT];
#pragma unroll
    for (int nt = 0; nt < S::NT; ++nt) {
      const int j = wn * S::NT + nt;
      codes[nt] = *reinterpret_cast<const uint2*>(b_s + j * 256 + lane * 8);
      const std::uint32_t sc =
          *reinterpret_cast<const std::uint32_t*>(s_s + j * 32 + (lane / 4) * 4);
      scale01[nt] = e4m3x2_to_scaled_bf16x2(sc);
      scale23[nt] = e4m3x2_to_scaled_bf16x2(sc >> 16);
    }
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      std::uint32_t a[S::MT][4];
#pragma unroll
      for (int mt = 0; mt < S::MT; ++mt) {
        const int row = wm * S::MT * 16 + mt * 16 + (lane & 15);
        const int chunk = 2 * step + (lane >> 4);
        ldmatrix_x4(a[mt], a_s + row * 128 + ((chunk ^ (row & 7)) * 16));
      }
#pragma unroll
      for (int nt = 0; nt < S::NT; ++nt) {
        const std::uint32_t word = step < 2 ? codes[nt].x : codes[nt].y;
        const std::uint32_t pair = step < 2 ? scale01[nt] : scale23[nt];
        const std::uint32_t s2 = __byte_perm(pair, 0, (step & 1) ? 0x3232 : 0x1010);
        const std::uint32_t b0 =
            bf16x2_mul((step & 1) ? tiny_bf16x2<2>(word) : tiny_bf16x2<0>(word), s2);
        const std::uint32_t b1 =
            bf16x2_mul((step & 1) ? tiny_bf16x2<3>(word) : tiny_bf16x2<1>(word), s2);
#pragma unroll
        for (int mt = 0; mt < S::MT; ++mt) mma_bf16(acc[mt][nt], a[mt], b0, b1);
      }
    }
  }

  // Epilogue: c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g+8.
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < S::NT; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const std::int64_t row = m0 + wm * S::MT * 16 + mt * 16 + lane / 4 + half * 8;
        const std::int64_t col = n0 + (wn * S::NT + nt) * 8 + (lane % 4) * 2;
        if (row >= m || col >= n) continue;
        const float v0 = acc[mt][nt][2 * half] * out_scale;
        const float v1 = acc[mt][nt][2 * half + 1] * out_scale;
        const bool pair = col + 1 < n;
        const std::int64_t at = row * n + col;
        if (workspace != nullptr) {
          if (pair && n % 2 == 0) {
            atomicAdd(reinterpret_cast<float2*>(workspace + at), make_float2(v0, v1));  // 8-B red
          } else {
            atomicAdd(workspace + at, v0);
            if (pair) atomicAdd(workspace + at + 1, v1);
          }
        } else {
          float r0 = v0, r1 = v1;
          if (residual != nullptr) {
            r0 += __bfloat162float(__ushort_as_bfloat16(residual[at]));
            if (pair) r1 += __bfloat162float(__ushort_as_bfloat16(residual[at + 1]));
          }
          out[at] = __bfloat16_as_ushort(__float2bfloat16_rn(r0));
          if (pair) out[at + 1] = __bfloat16_as_ushort(__float2bfloat16_rn(r1));
        }
      }
    }
  }
  if (workspace == nullptr) return;

  // Split K: the last block to arrive at this output tile writes it out and re-zeroes it.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  unsigned* counters = reinterpret_cast<unsigned*>(workspace + m * n);
  unsigned* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.z - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int e = threadIdx.x; e < S::BM * S::BN; e += S::THREADS) {
    const std::int64_t row = m0 + e / S::BN, col = n0 + e % S::BN;
    if (row >= m || col >= n) continue;
    float* cell = workspace + row * n + col;
    float v = __ldcg(cell);
    __stcg(cell, 0.0f);
    if (residual != nullptr) v += __bfloat162float(__ushort_as_bfloat16(residual[row * n + col]));
    out[row * n + col] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  if (threadIdx.x == 0) *counter = 0;
}

template <class S>
cudaError_t launch(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                   const std::uint16_t* residual, std::uint16_t* out, int splits, float* workspace,
                   cudaStream_t stream) {
  // Once per kernel, before any stream capture: the opt-in to > 48 KB of shared memory.
  static const cudaError_t attribute_err =
      S::SMEM > 48 * 1024
          ? cudaFuncSetAttribute(w4a16_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 S::SMEM)
          : cudaSuccess;
  if (attribute_err != cudaSuccess) return attribute_err;
  const std::int64_t tiles_k = w.k_padded / kBk;
  if (splits < 1) splits = 1;
  if (splits > tiles_k) splits = int(tiles_k);
  const int kt_per_split = int((tiles_k + splits - 1) / splits);
  splits = int((tiles_k + kt_per_split - 1) / kt_per_split);
  const bool split = splits > 1;
  if (split && workspace == nullptr) return cudaErrorInvalidValue;
  const float out_scale = w.global_factor * 1024.0f;
  const dim3 grid(unsigned(w.n_padded / S::BN), unsigned((m + S::BM - 1) / S::BM),
                  unsigned(splits));
  w4a16_kernel<S><<<grid, S::THREADS, S::SMEM, stream>>>(x, m, w.n, w.k, w.tiles, w.scales, tiles_k,
                                                         out_scale, residual, out,
                                                         split ? workspace : nullptr, kt_per_split);
  return cudaGetLastError();
}

}  // namespace

cudaError_t w4a16_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                         int splits, float* workspace, cudaStream_t stream) {
  if (m < 0 || w.n <= 0 || w.k <= 0 || w.k % 16 != 0 || w.n_padded % kW4A16TileCols != 0 ||
      w.k_padded % kBk != 0 || w.n_padded < w.n || w.k_padded < w.k) {
    return cudaErrorInvalidValue;
  }
  if (m == 0) return cudaSuccess;
  switch (tile) {
    case W4A16Tile::kM16:
      return launch<ShapeM16>(x, m, w, residual, out, splits, workspace, stream);
    case W4A16Tile::kM64:
      return launch<ShapeM64>(x, m, w, residual, out, splits, workspace, stream);
    case W4A16Tile::kM128:
      return launch<ShapeM128>(x, m, w, residual, out, splits, workspace, stream);
    case W4A16Tile::kGemv:
      return w4a16_gemv_linear(x, m, w, residual, out, splits, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace nibble::kernels
