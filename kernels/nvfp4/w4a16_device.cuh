#pragma once
// Device helpers shared by the W4A16 kernels (w4a16_gemm.cu, w4a16_gemv.cu): cp.async, ldmatrix
// from generic pointers (the tensor-core primitives themselves: kernels/mma_sync.cuh), and the
// FP4 / E4M3 -> BF16 decode of the repacked layout.
//
// FP4 -> BF16 without a table: an E2M1 code's 3 magnitude bits placed at bf16 bits 6..8 (and
// its sign at bit 15; the layout stores them so that one shift and one mask do it) read as a bf16
// equal to value * 2^-126 (E2M1 exponent 0 lands on bf16 subnormals, exponents 1..3 on tiny
// normals). Multiplying by the block scale stored as bf16(e4m3 * 2^116) gives value * e4m3 * 2^-10
// exactly (at most 6 significant bits), and the epilogue multiplies by global_factor * 2^10.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dependent_launch.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/nvfp4/w4a16_format.h"

namespace nibble::kernels::w4a16_detail {

// Split K into whole k steps with no empty split: clamps *splits to [1, tiles_k], then to the
// count that kt_per_split (returned) steps per split give (host side of every split-K launch).
inline int whole_step_splits(std::int64_t tiles_k, int* splits) {
  if (*splits < 1) *splits = 1;
  if (*splits > tiles_k) *splits = int(tiles_k);
  const int kt_per_split = int((tiles_k + *splits - 1) / *splits);
  *splits = int((tiles_k + kt_per_split - 1) / kt_per_split);
  return kt_per_split;
}

__device__ inline void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0));
}

// Launch configuration with programmatic dependent launch (kernels/dependent_launch.cuh) on or
// off, and optionally a cluster shape. Under the dependent launch nothing that the previous kernel
// writes (x, residual, out, workspace) may be touched before wait_for_previous_grid(); the weights
// may. Used in place (config points into it).
struct LaunchWithOverlap {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attributes[2]{};
  LaunchWithOverlap(dim3 grid, int threads, int smem, cudaStream_t stream, bool overlap) {
    config.gridDim = grid;
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = std::size_t(smem);
    config.stream = stream;
    config.attrs = attributes;
    if (overlap) {
      cudaLaunchAttribute& a = attributes[config.numAttrs++];
      a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a.val.programmaticStreamSerializationAllowed = 1;
    }
  }
  LaunchWithOverlap(const LaunchWithOverlap&) = delete;
  LaunchWithOverlap& operator=(const LaunchWithOverlap&) = delete;
  // Blocks launched in (x, y, z) clusters.
  void cluster(unsigned x, unsigned y, unsigned z) {
    cudaLaunchAttribute& a = attributes[config.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = x, a.val.clusterDim.y = y, a.val.clusterDim.z = z;
  }
};

__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// Fragment pair P of a layout word -> bf16x2 of value * 2^-126 (bit placement: w4a16_layout.h).
template <int P>
__device__ inline std::uint32_t tiny_bf16x2(std::uint32_t w) {
  constexpr std::uint32_t kMask = 0x81C081C0u;  // bf16 bits 6..8 and 15, both halves
  if constexpr (P == 0) return w & kMask;
  if constexpr (P == 1) return (w << 3) & kMask;
  if constexpr (P == 2) return (w << 6) & kMask;
  return ((w >> 4) & 0x00C000C0u) | ((w >> 5) & 0x01000100u) | ((w << 1) & 0x80008000u);
}

// Two non-negative E4M3 codes (low byte first; the layout stores them so) -> bf16x2 of
// e4m3 * 2^116; exact. The fp16 of an E4M3 value is normal with its low 7 mantissa bits zero,
// so one shift moves both halves to bf16 positions and one add rebiases the exponents
// (fp16 bias 15 -> bf16 bias 127, plus 116: add 112 + 116). Zero codes give a non-zero bf16,
// harmless because the repack zeroes the codes of zero-scale blocks.
__device__ inline std::uint32_t e4m3x2_to_scaled_bf16x2(std::uint32_t two_codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two_codes & 0xFFFF), __NV_E4M3);
  const std::uint32_t bits = std::uint32_t(h.x) | (std::uint32_t(h.y) << 16);
  return (bits >> 3) + 0x72007200u;
}

// Two MXFP4 scale bytes s (w4a16_layout.h: 2^(s - 127); low byte first) -> bf16x2 of
// 2^(s - 127) * 2^116, NVFP4's scaled form, so the decode's one multiply and the epilogue's
// global_factor * 2^10 stay as they are. s + 116 is placed in each half's exponent field: a byte
// permute, a shift and an add instead of the E4M3 conversion; exact for s in [5, 138], the range
// the repack keeps (s = 0 gives 2^-11, harmless: its codes are zero).
__device__ inline std::uint32_t e8m0x2_to_scaled_bf16x2(std::uint32_t two_codes) {
  const std::uint32_t halves = __byte_perm(two_codes, 0u, 0x4140);  // s0 | s1 << 16
  return (halves << 7) + 0x3A003A00u;                               // + (116 << 7) each half
}

// The scaled bf16x2 of two layout scale bytes, for the weight's format (template: no runtime
// branch in either format's loop).
template <nvfp4::W4A16Format F>
__device__ inline std::uint32_t scales_to_bf16x2(std::uint32_t two_codes) {
  if constexpr (F == nvfp4::W4A16Format::kMxfp4) {
    return e8m0x2_to_scaled_bf16x2(two_codes);
  } else {
    return e4m3x2_to_scaled_bf16x2(two_codes);
  }
}

// a * {pair.half[H], pair.half[H]}: written as a half broadcast so that ptxas can use the
// multiply's operand swizzle instead of a separate PRMT.
template <int H>
__device__ inline std::uint32_t bf16x2_mul_by_half(std::uint32_t a, std::uint32_t pair) {
  std::uint32_t d;
  if constexpr (H == 0) {
    asm("{.reg .b16 lo, hi;\n .reg .b32 s;\n mov.b32 {lo, hi}, %2;\n mov.b32 s, {lo, lo};\n"
        " fma.rn.bf16x2 %0, %1, s, %3;}\n"
        : "=r"(d)
        : "r"(a), "r"(pair), "r"(0x80008000u));
  } else {
    asm("{.reg .b16 lo, hi;\n .reg .b32 s;\n mov.b32 {lo, hi}, %2;\n mov.b32 s, {hi, hi};\n"
        " fma.rn.bf16x2 %0, %1, s, %3;}\n"
        : "=r"(d)
        : "r"(a), "r"(pair), "r"(0x80008000u));
  }
  return d;
}

// The two BF16 fragment registers of one lane for k16 step `step` (0..3) of an 8-row tile's k step
// (w4a16_layout.h): `lo` holds columns 2t, 2t + 1 and `hi` columns 2t + 8, 2t + 9 of the lane's
// row, scaled. `codes` is the lane's 8 bytes of the tile; scale01 / scale23 are
// e4m3x2_to_scaled_bf16x2 of its scale bytes for steps 0, 1 and 2, 3. As a B operand (n8) lo and
// hi are b0, b1; in the swapped form two tiles' lo and hi make an A operand (rows g, g + 8).
__device__ inline void decode_fragment_pair(uint2 codes, std::uint32_t scale01,
                                            std::uint32_t scale23, int step, std::uint32_t& lo,
                                            std::uint32_t& hi) {
  const std::uint32_t word = step < 2 ? codes.x : codes.y;
  const std::uint32_t pair = step < 2 ? scale01 : scale23;
  lo = (step & 1) ? bf16x2_mul_by_half<1>(tiny_bf16x2<2>(word), pair)
                  : bf16x2_mul_by_half<0>(tiny_bf16x2<0>(word), pair);
  hi = (step & 1) ? bf16x2_mul_by_half<1>(tiny_bf16x2<3>(word), pair)
                  : bf16x2_mul_by_half<0>(tiny_bf16x2<1>(word), pair);
}

// Which output tile a block computes. Blocks start roughly in launch order, so the order decides
// what one wave of resident blocks reads: row-major over a wide layer (gate_up: 224 weight groups
// per 128 rows of x) streams the whole weight matrix from DRAM once per wave. Bands of
// kRasterBand row tiles, walked column by column, keep a wave on ~33 weight groups and ~8 x
// tiles that L2 holds. A bijection for any grid; one row tile (small M) is the identity.
constexpr int kRasterBand = 8;
struct OutputTile {
  unsigned row, col;
};
__device__ inline OutputTile output_tile(unsigned band) {
  const unsigned cols = gridDim.x, rows = gridDim.y;
  const unsigned linear = blockIdx.y * cols + blockIdx.x;
  const unsigned first_row = linear / (band * cols) * band;
  const unsigned band_rows = rows - first_row < band ? rows - first_row : band;
  const unsigned within = linear - first_row * cols;
  return {first_row + within % band_rows, within / band_rows};
}

__device__ inline std::uint32_t bf16x2_mul(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  // fma with -0 addend: an exact product keeps its sign, +0 stays +0.
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// Split K: every block of the grid's z splits calls it (the whole block) after adding its partial
// tile into the workspace; true in the last block to arrive at `counter` (the tile's arrival
// count), which then sees every split's sums. The caller writes the tile out and re-arms it.
__device__ inline bool last_split_to_arrive(unsigned* counter) {
  __shared__ bool last;
  __threadfence();  // this block's sums visible device-wide before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.z - 1;
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace nibble::kernels::w4a16_detail
