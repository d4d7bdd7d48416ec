#pragma once
// A slice block's epilogue: the warps' K-split sums meet in shared memory (the rings are drained
// by then), and the block writes its m x S::kRows outputs: plain rows (+ residual), the MoE
// gate_up's SiLU product, or the MoE down's rows followed by the weighted combine of the tokens
// whose k rows are all done.
#include <cstdint>

#include "kernels/nvfp4/w4a16_grouped.h"
#include "kernels/nvfp4/w4a16_slice_mainloop.cuh"

namespace nibble::kernels {
namespace {

// The block's sums in shared memory, [warp][mt][pair][e][lane], read back per output.
template <class S, int MT>
struct SliceSums {
  static constexpr int kSums = MT * S::kPairs * 4;  // per lane and warp
  const float* partial;
  float out_scale;

  // Every thread of the block; smem: the rings' shared memory, drained here.
  __device__ __forceinline__ SliceSums(std::uint8_t* smem, const SliceAccumulators<S, MT>& sums,
                                       float scale)
      : out_scale(scale) {
    constexpr int kSets = SliceAccumulators<S, MT>::kSets;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    cp_async_wait<0>();
    __syncthreads();
    float* at = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int p = 0; p < S::kPairs; ++p)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float sum = sums.acc[0][mt][p][e];
          if constexpr (kSets == 2) sum += sums.acc[1][mt][p][e];
          at[((warp * MT + mt) * S::kPairs + p) * 128 + e * 32 + lane] = sum;
        }
    __syncthreads();
    partial = at;
  }

  // Output (x row r = 8 mt + rr, weight row j of the slice): c0, c1 of pair p hold row g of tile
  // 2p for x rows 2t, 2t + 1 of fragment mt; c2, c3 the same of tile 2p + 1 (lane = 4g + t).
  __device__ __forceinline__ float operator()(int r, int j) const {
    const int mt = r / 8, rr = r % 8, p = j / 16, within = j % 16;
    const int e = (within / 8) * 2 + (rr & 1), src_lane = (within % 8) * 4 + rr / 2;
    const float* sums = partial + (mt * S::kPairs + p) * 128 + e * 32 + src_lane;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < S::kWarps; ++w) sum += sums[w * kSums * 32];
    return sum * out_scale;
  }
};

// out[r, n0 + j] = bf16(output(r, j) (+ residual[r, n0 + j])) for the block's m rows, columns < n.
template <class S, int MT>
__device__ __forceinline__ void store_rows(const SliceSums<S, MT>& output, int m, std::int64_t n0,
                                           std::int64_t n,
                                           const std::uint16_t* __restrict__ residual,
                                           std::uint16_t* __restrict__ out) {
  for (int idx = threadIdx.x; idx < m * S::kRows; idx += S::kThreads) {
    const int r = idx / S::kRows, j = idx % S::kRows;
    const std::int64_t col = n0 + j;
    if (col >= n) continue;
    float sum = output(r, j);
    const std::int64_t at = std::int64_t(r) * n + col;
    if (residual != nullptr) sum += __bfloat162float(__ushort_as_bfloat16(residual[at]));
    out[at] = __bfloat16_as_ushort(__float2bfloat16_rn(sum));
  }
}

// The gate_up + SiLU slice (16 gate rows, then their 16 up rows): gate row j of the slice is slot
// row j, its up row slot row 16 + j; both rounded to BF16 as the gate_up output would be, then
// silu_mul_halves' expression, into out [rows, n / 2] at column n0 + j.
template <class S, int MT>
__device__ __forceinline__ void store_silu_product(const SliceSums<S, MT>& output, int m,
                                                   std::int64_t n0, std::int64_t n,
                                                   std::uint16_t* __restrict__ out) {
  auto rounded = [](float v) { return __bfloat162float(__float2bfloat16_rn(v)); };
  const std::int64_t width = n / 2;
  for (int idx = threadIdx.x; idx < m * 16; idx += S::kThreads) {
    const int r = idx / 16, j = idx % 16;
    const float g = rounded(output(r, j)), u = rounded(output(r, 16 + j));
    out[std::int64_t(r) * width + n0 + j] =
        __bfloat16_as_ushort(__float2bfloat16_rn(g / (1.0f + __expf(-g)) * u));
  }
}

// gpt-oss's gate_up (slot rows 2j gate j, 2j + 1 up j: 32 interleaved weight rows from 2 n0):
// g and u with the expert's biases (bias: its gate_up row 2 n0), rounded to BF16 as the gate_up
// output would be, then the clamped SwiGLU as the CPU backend writes it (cpu_ops
// clamped_swiglu_value), into out [rows, n / 2] at column n0 + j.
template <class S, int MT>
__device__ __forceinline__ void store_clamped_swiglu(const SliceSums<S, MT>& output, int m,
                                                     std::int64_t n0, std::int64_t n,
                                                     const std::uint16_t* __restrict__ bias,
                                                     float alpha, float limit,
                                                     std::uint16_t* __restrict__ out) {
  auto rounded = [](float v) { return __bfloat162float(__float2bfloat16_rn(v)); };
  auto bias_at = [&](int row) { return __bfloat162float(__ushort_as_bfloat16(bias[row])); };
  const std::int64_t width = n / 2;
  for (int idx = threadIdx.x; idx < m * 16; idx += S::kThreads) {
    const int r = idx / 16, j = idx % 16;
    const float g = fminf(rounded(output(r, 2 * j) + bias_at(2 * j)), limit);
    const float u = fminf(fmaxf(rounded(output(r, 2 * j + 1) + bias_at(2 * j + 1)), -limit), limit);
    out[std::int64_t(r) * width + n0 + j] =
        __bfloat16_as_ushort(__float2bfloat16_rn((u + 1.0f) * (g / (1.0f + __expf(-alpha * g)))));
  }
}

// out[r, n0 + j] = bf16(output(r, j) + bias[n0 + j]) (bias: the expert's, [n]), columns < n.
template <class S, int MT>
__device__ __forceinline__ void store_rows_with_bias(const SliceSums<S, MT>& output, int m,
                                                     std::int64_t n0, std::int64_t n,
                                                     const std::uint16_t* __restrict__ bias,
                                                     std::uint16_t* __restrict__ out) {
  for (int idx = threadIdx.x; idx < m * S::kRows; idx += S::kThreads) {
    const int r = idx / S::kRows, j = idx % S::kRows;
    const std::int64_t col = n0 + j;
    if (col >= n) continue;
    const float sum = output(r, j) + __bfloat162float(__ushort_as_bfloat16(bias[col]));
    out[std::int64_t(r) * n + col] = __bfloat16_as_ushort(__float2bfloat16_rn(sum));
  }
}

// After the down's rows are out (out_all: the whole expert_out [rows, n]): each of the block's
// tokens counts one more of its k rows done over this column slice. The block that brings a count
// to k combines that token's slice: every other row of it was written and fenced before its count
// went up. fuse.out[t, c] = residual[t, c] + sum_j weight[t, j] * expert_out[source[t, j], c].
// last_tokens, last_count: the kernel's own shared memory (kMaxRows ints, one int).
template <class S>
__device__ __forceinline__ void combine_tokens(const W4A16GroupedCombine& fuse, int m,
                                               std::int32_t row0, std::int64_t n0, std::int64_t n,
                                               const std::uint16_t* out_all, SlicePlace place,
                                               int* last_tokens, int& last_count) {
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

}  // namespace
}  // namespace nibble::kernels
