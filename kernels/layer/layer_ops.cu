#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/kv_fp8.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/layer/layer_ops.h"
#include "kernels/layer/rope_math.cuh"

namespace nibble::kernels {
namespace {

using kernels::allow_next_grid;
using kernels::wait_for_previous_grid;

// Decode-sized launches (a few rows) of the kernels below go out with programmatic dependent
// launch (kernels/dependent_launch.cuh): the block is scheduled while the linear before it still
// runs, fetches what the previous kernel does not write (norm weights, inverse frequencies,
// positions), lets the next linear start fetching its weights, and waits for the previous kernel
// only before it reads its output. Without the attribute a small kernel starts after the previous
// kernel's end plus a launch gap (~3.4 us for a 4096-wide norm on H100, most of it not the
// norm). Every kernel here calls wait_for_previous_grid() before touching memory the previous
// kernel writes, so the attribute is safe after any kernel. LayerOptions::small_overlap = false
// turns it off (A/B); prefill-sized launches never take it (their grids are many waves).
constexpr std::int64_t kOverlapMaxRows = 16;

// Launches kernel<<<grid, threads, 0, stream>>>(args...), with the dependent-launch attribute
// when `rows` is decode-sized and `overlap` (LayerOptions::small_overlap).
template <class... Params, class... Args>
cudaError_t launch_small(void (*kernel)(Params...), dim3 grid, int threads, std::int64_t rows,
                         bool overlap, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = rows <= kOverlapMaxRows && overlap ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, Params(args)...);
  return err != cudaSuccess ? err : cudaGetLastError();
}

__device__ __forceinline__ float load(const std::uint16_t* p, std::int64_t i) {
  return __bfloat162float(__ushort_as_bfloat16(p[i]));
}
__device__ __forceinline__ std::uint16_t to_bf16(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// Reduces v over the block with op, identity filling the unused warp slots (blockDim.x a
// multiple of 32, at most 1024); every thread gets the result.
template <class Op>
__device__ float block_reduce(float v, Op op, float identity) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? partial[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float block_sum(float v) {
  return block_reduce(
      v, [](float a, float b) { return a + b; }, 0.0f);
}

__device__ float block_max(float v) {
  return block_reduce(
      v, [](float a, float b) { return fmaxf(a, b); }, -INFINITY);
}

// Stores one (token, KV head) row of the FP8 cache (kv_fp8_ref.h) from this thread's two values
// (lo at i, hi at i + D/2; inactive threads hold zeros); every thread of the block calls it.
__device__ void store_fp8_row(float lo, float hi, bool active, int i, int half, std::int64_t row,
                              std::uint8_t* codes, std::uint16_t* scales) {
  const std::uint16_t scale = kv_fp8_scale(block_max(fmaxf(fabsf(lo), fabsf(hi))));
  if (!active) return;
  const float inv = 1.0f / bf16_bits_to_float(scale);
  codes[row * 2 * half + i] = kv_fp8_code(lo, inv);
  codes[row * 2 * half + i + half] = kv_fp8_code(hi, inv);
  if (i == 0) scales[row] = scale;
}

__global__ void embed_kernel(const std::uint16_t* table, const std::int32_t* tokens, int dim,
                             std::uint16_t* out) {
  allow_next_grid();  // the first norm follows: its block may be scheduled now and wait there
  const std::int64_t src = std::int64_t(tokens[blockIdx.x]) * dim,
                     dst = std::int64_t(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[dst + i] = table[src + i];
}

__global__ void gather_kernel(const std::uint16_t* in, const std::int32_t* index, int dim,
                              std::uint16_t* out) {
  const std::int64_t src = std::int64_t(index[blockIdx.x]) * dim,
                     dst = std::int64_t(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[dst + i] = in[src + i];
}

// One block per row; the row is read twice (sum of squares, then scale) from L1/L2.
// index (may be null): row r reads input row index[r].
__global__ void rms_norm_kernel(const std::uint16_t* in, const std::int32_t* index,
                                const float* weight, int dim, float eps, std::uint16_t* out) {
  allow_next_grid();  // a linear follows: it fetches its first weights while this runs
  wait_for_previous_grid();
  const std::int64_t base = std::int64_t(blockIdx.x) * dim;
  const std::int64_t from = index != nullptr ? std::int64_t(index[blockIdx.x]) * dim : base;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = load(in, from + i);
    sum += v * v;
  }
  const float scale = rsqrtf(block_sum(sum) / float(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    out[base + i] = to_bf16(load(in, from + i) * scale * weight[i]);
}

// The same with 16-byte loads and the row held in registers between the two passes: one block
// per row, each thread up to kNormVectors vectors of 8 values. The loop above issues dim/256
// dependent 2-byte loads per thread twice over; at batch 1 its latency (~9 us per 4096-wide row
// on an H200, ~18 us per layer) cost more than the q/k/v projection it feeds.
constexpr int kNormVectors = 4;  // rows up to 8 * 4 * 1024 = 32768 wide

__device__ __forceinline__ float2 bf16_pair(std::uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__global__ void __launch_bounds__(1024)
    rms_norm_vector_kernel(const std::uint16_t* in, const std::int32_t* index, const float* weight,
                           int dim, float eps, std::uint16_t* out) {
  allow_next_grid();  // a linear follows: it fetches its first weights while this runs
  const int vectors = dim / 8;
  // The first vector's norm weights before the wait (rows up to 8 x blockDim wide have no other).
  const int first = int(threadIdx.x);
  float4 w0 = make_float4(0, 0, 0, 0), w1 = w0;
  if (first < vectors) {
    w0 = __ldg(reinterpret_cast<const float4*>(weight) + 2 * first);
    w1 = __ldg(reinterpret_cast<const float4*>(weight) + 2 * first + 1);
  }
  wait_for_previous_grid();  // in (and index, out) may be the previous kernel's
  const std::int64_t from = index != nullptr ? index[blockIdx.x] : blockIdx.x;
  const uint4* row = reinterpret_cast<const uint4*>(in + from * dim);
  uint4 x[kNormVectors];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormVectors; ++j) {
    const int i = int(threadIdx.x) + j * int(blockDim.x);
    x[j] = i < vectors ? row[i] : make_uint4(0, 0, 0, 0);
    const std::uint32_t words[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = bf16_pair(words[k]);
      sum += f.x * f.x + f.y * f.y;
    }
  }
  const float scale = rsqrtf(block_sum(sum) / float(dim) + eps);
  uint4* dst = reinterpret_cast<uint4*>(out + std::int64_t(blockIdx.x) * dim);
#pragma unroll
  for (int j = 0; j < kNormVectors; ++j) {
    const int i = int(threadIdx.x) + j * int(blockDim.x);
    if (i >= vectors) continue;
    if (j > 0) {
      w0 = reinterpret_cast<const float4*>(weight)[2 * i];
      w1 = reinterpret_cast<const float4*>(weight)[2 * i + 1];
    }
    const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    const std::uint32_t words[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
    std::uint32_t packed[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = bf16_pair(words[k]);
      packed[k] = std::uint32_t(to_bf16(f.x * scale * wv[2 * k])) |
                  std::uint32_t(to_bf16(f.y * scale * wv[2 * k + 1])) << 16;
    }
    dst[i] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Partial RoPE's widest head: the normed head is exchanged through shared memory.
constexpr int kPartialRopeMaxHeadDim = 512;

// One block per (token, head), D/2 threads rounded up to whole warps; heads [0, Hq) are q heads,
// [Hq, Hq + Hkv) k heads (whose v head is stored alongside). Thread i < D/2 owns the elements
// (i, i + D/2), the rotate-half pair of full RoPE; the others only take part in the sum. Partial
// RoPE (kPartial) pairs (j, j + rotary_dim/2) instead, across threads: the normed head goes
// through shared memory first.
template <bool kPartial>
__global__ void rope_store_kernel(RopeStoreArgs a) {
  allow_next_grid();  // decode attention follows: it asks the L2 for its older keys, then waits
  const int t = blockIdx.x, head = blockIdx.y, half = a.head_dim / 2;
  const bool active = int(threadIdx.x) < half;
  const int i = active ? int(threadIdx.x) : 0;
  // The step's positions and the frequencies are no kernel's output: fetched before the wait.
  const std::int32_t position = a.positions[t];
  const double inv_freq = kPartial ? 0.0 : a.inv_freq[i];
  wait_for_previous_grid();
  const bool is_q = head < a.q_heads;
  const int kvh = head - a.q_heads;
  const std::int64_t q_head_stride = a.q_head_stride > 0 ? a.q_head_stride : a.head_dim;
  const std::int64_t src = is_q ? t * a.q_stride + std::int64_t(head) * q_head_stride
                                : t * a.kv_stride + std::int64_t(kvh) * a.head_dim;
  const std::uint16_t* x = is_q ? a.q_in : a.k;
  float lo = active ? load(x, src + i) : 0.0f, hi = active ? load(x, src + i + half) : 0.0f;
  const float* norm = is_q ? a.q_norm : a.k_norm;
  if (norm != nullptr) {
    const float scale = rsqrtf(block_sum(lo * lo + hi * hi) / float(a.head_dim) + a.eps);
    // Rounded to BF16 between the norm and the rotation, as the model's own BF16 code does.
    lo = __bfloat162float(__float2bfloat16_rn(lo * scale * norm[i]));
    hi = __bfloat162float(__float2bfloat16_rn(hi * scale * norm[i + half]));
  }
  float rlo, rhi;
  if constexpr (kPartial) {
    __shared__ float normed[kPartialRopeMaxHeadDim];
    if (active) {
      normed[i] = lo;
      normed[i + half] = hi;
    }
    __syncthreads();
    const int rhalf = a.rotary_dim / 2;
    // Element e of the head after partial RoPE.
    const auto rotated_at = [&](int e) {
      if (e >= a.rotary_dim) return normed[e];
      const int j = e < rhalf ? e : e - rhalf;
      const float2 r =
          rope_rotate(normed[j], normed[j + rhalf], position, a.inv_freq[j], a.attention_factor);
      return e < rhalf ? r.x : r.y;
    };
    rlo = active ? rotated_at(i) : 0.0f;
    rhi = active ? rotated_at(i + half) : 0.0f;
  } else {
    const float2 rotated = rope_rotate(lo, hi, position, inv_freq, a.attention_factor);
    rlo = rotated.x;
    rhi = rotated.y;
  }
  if (is_q) {
    if (!active) return;
    const std::int64_t dst = (std::int64_t(t) * a.q_heads + head) * a.head_dim;
    a.q_out[dst + i] = to_bf16(rlo);
    a.q_out[dst + i + half] = to_bf16(rhi);
    return;
  }
  const std::int64_t row = a.slots[t] * a.kv_heads + kvh;
  if (a.k_cache8 != nullptr) {  // FP8: the BF16 values the BF16 cache would hold, quantised
    const float klo = bf16_bits_to_float(to_bf16(rlo)), khi = bf16_bits_to_float(to_bf16(rhi));
    const float vlo = active ? load(a.v, src + i) : 0.0f;
    const float vhi = active ? load(a.v, src + i + half) : 0.0f;
    store_fp8_row(klo, khi, active, i, half, row, a.k_cache8, a.k_scale);
    store_fp8_row(vlo, vhi, active, i, half, row, a.v_cache8, a.v_scale);
    return;
  }
  if (!active) return;
  const std::int64_t dst = row * a.head_dim;
  a.k_cache[dst + i] = to_bf16(rlo);
  a.k_cache[dst + i + half] = to_bf16(rhi);
  a.v_cache[dst + i] = a.v[src + i];
  a.v_cache[dst + i + half] = a.v[src + i + half];
}

__global__ void silu_mul_kernel(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t n,
                                std::uint16_t* act) {
  allow_next_grid();  // down follows
  wait_for_previous_grid();
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const float g = load(gate, i);
    act[i] = to_bf16(g / (1.0f + __expf(-g)) * load(up, i));
  }
}

// gate_up's rows as [gate columns; up columns] halves.
__global__ void silu_mul_rows_kernel(const std::uint16_t* gate_up, std::int64_t rows,
                                     std::int64_t width, std::uint16_t* act) {
  allow_next_grid();  // down follows
  wait_for_previous_grid();
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const std::int64_t in = r * 2 * width, out = r * width;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < width;
         i += std::int64_t(gridDim.x) * blockDim.x) {
      const float g = load(gate_up, in + i);
      act[out + i] = to_bf16(g / (1.0f + __expf(-g)) * load(gate_up, in + width + i));
    }
  }
}

// gpt-oss's expert middle from gate_up's interleaved columns (gate 2i, up 2i + 1).
__global__ void clamped_swiglu_rows_kernel(const std::uint16_t* gate_up, std::int64_t rows,
                                           std::int64_t width, float alpha, float limit,
                                           std::uint16_t* act) {
  allow_next_grid();  // down follows
  wait_for_previous_grid();
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const std::int64_t in = r * 2 * width, out = r * width;
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < width;
         i += std::int64_t(gridDim.x) * blockDim.x) {
      const float g = fminf(load(gate_up, in + 2 * i), limit);
      const float u = fminf(fmaxf(load(gate_up, in + 2 * i + 1), -limit), limit);
      act[out + i] = to_bf16((u + 1.0f) * (g / (1.0f + __expf(-alpha * g))));
    }
  }
}

__global__ void add_bias_float_kernel(float* y, const float* bias, int cols) {
  const std::int64_t base = std::int64_t(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[base + c] += bias[c];
}

__global__ void add_bias_kernel(std::uint16_t* y, const float* bias, int cols) {
  const std::int64_t base = std::int64_t(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[base + c] = to_bf16(load(y, base + c) + bias[c]);
}

__global__ void combine_kernel(const std::uint16_t* residual, const std::uint16_t* expert_out,
                               const std::int32_t* source, const float* weight, int per_token,
                               int dim, std::uint16_t* out) {
  const int t = blockIdx.x;
  const std::int64_t base = std::int64_t(t) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float v = 0.0f;
    for (int j = 0; j < per_token; ++j)
      v += weight[t * per_token + j] *
           load(expert_out, std::int64_t(source[t * per_token + j]) * dim + d);
    out[base + d] = to_bf16(load(residual, base + d) + v);
  }
}

// One block per row.
__global__ void sigmoid_gate_heads_kernel(std::uint16_t* y, const std::uint16_t* gate, int heads,
                                          int dim, std::int64_t gate_stride,
                                          std::int64_t gate_head_stride) {
  const std::int64_t t = blockIdx.x;
  for (int e = threadIdx.x; e < heads * dim; e += blockDim.x) {
    const int h = e / dim, d = e % dim;
    const float g = load(gate, t * gate_stride + h * gate_head_stride + d);
    const std::int64_t at = t * heads * dim + e;
    y[at] = to_bf16(load(y, at) / (1.0f + __expf(-g)));
  }
}

// One block per row.
__global__ void add_sigmoid_scaled_kernel(std::uint16_t* x, const std::uint16_t* y,
                                          const float* scale, int dim) {
  const std::int64_t base = std::int64_t(blockIdx.x) * dim;
  const float s = 1.0f / (1.0f + __expf(-scale[blockIdx.x]));
  for (int d = threadIdx.x; d < dim; d += blockDim.x)
    x[base + d] = to_bf16(load(x, base + d) + s * load(y, base + d));
}

__global__ void bf16_to_float_kernel(const std::uint16_t* in, std::int64_t n, float* out) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = load(in, i);
}

int threads_for(int dim) {
  return dim >= 1024 ? 256 : dim >= 256 ? 128 : 64;
}
unsigned grid_for(std::int64_t n) {
  return unsigned(std::min<std::int64_t>((n + 255) / 256, 65536));
}

cudaError_t silu_mul_rows(const std::uint16_t* gate_up, std::int64_t rows, std::int64_t width,
                          std::uint16_t* act, cudaStream_t stream, bool overlap) {
  if (rows == 0 || width == 0) return cudaSuccess;
  const dim3 grid(unsigned(std::min<std::int64_t>((width + 255) / 256, 64)),
                  unsigned(std::min<std::int64_t>(rows, 65535)));
  return launch_small(silu_mul_rows_kernel, grid, 256, rows, overlap, stream, gate_up, rows, width,
                      act);
}

}  // namespace

cudaError_t embed_rows(const std::uint16_t* table, const std::int32_t* tokens, int rows, int dim,
                       std::uint16_t* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  embed_kernel<<<rows, threads_for(dim), 0, stream>>>(table, tokens, dim, out);
  return cudaGetLastError();
}

cudaError_t rms_norm(const std::uint16_t* in, const float* weight, int rows, int dim, float eps,
                     std::uint16_t* out, cudaStream_t stream, const LayerOptions& options) {
  return rms_norm_rows(in, nullptr, weight, rows, dim, eps, out, stream, options);
}

cudaError_t rms_norm_rows(const std::uint16_t* in, const std::int32_t* index, const float* weight,
                          int rows, int dim, float eps, std::uint16_t* out, cudaStream_t stream,
                          const LayerOptions& options) {
  if (rows == 0) return cudaSuccess;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const int vectors = dim / 8;
  if (dim % 8 == 0 && vectors <= kNormVectors * 1024 && aligned(in) && aligned(out) &&
      aligned(weight)) {
    // One vector per thread up to 1024 threads, then up to kNormVectors each.
    const int threads = std::min(1024, (vectors + 31) / 32 * 32);
    return launch_small(rms_norm_vector_kernel, dim3(unsigned(rows)), threads, rows,
                        options.small_overlap, stream, in, index, weight, dim, eps, out);
  }
  return launch_small(rms_norm_kernel, dim3(unsigned(rows)), threads_for(dim), rows,
                      options.small_overlap, stream, in, index, weight, dim, eps, out);
}

cudaError_t gather_rows(const std::uint16_t* in, const std::int32_t* index, int rows, int dim,
                        std::uint16_t* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  gather_kernel<<<rows, threads_for(dim), 0, stream>>>(in, index, dim, out);
  return cudaGetLastError();
}

cudaError_t rope_and_store_kv(const RopeStoreArgs& args, cudaStream_t stream,
                              const LayerOptions& options) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim % 2 != 0 || args.head_dim > 2048) return cudaErrorInvalidValue;
  const bool partial = args.rotary_dim != 0 && args.rotary_dim != args.head_dim;
  if (partial && (args.rotary_dim < 0 || args.rotary_dim % 2 != 0 ||
                  args.rotary_dim > args.head_dim || args.head_dim > kPartialRopeMaxHeadDim))
    return cudaErrorInvalidValue;
  const dim3 grid(unsigned(args.tokens), unsigned(args.q_heads + args.kv_heads));
  const int threads = (args.head_dim / 2 + 31) / 32 * 32;  // block_sum needs whole warps
  return partial ? launch_small(rope_store_kernel<true>, grid, threads, args.tokens,
                                options.small_overlap, stream, args)
                 : launch_small(rope_store_kernel<false>, grid, threads, args.tokens,
                                options.small_overlap, stream, args);
}

cudaError_t silu_mul(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t n,
                     std::uint16_t* act, cudaStream_t stream, const LayerOptions& options) {
  if (n == 0) return cudaSuccess;
  // One "row" per 4096 elements for the overlap rule (a decode step's few rows of SwiGLU).
  return launch_small(silu_mul_kernel, dim3(grid_for(n)), 256, (n + 4095) / 4096,
                      options.small_overlap, stream, gate, up, n, act);
}

cudaError_t silu_mul_halves(const std::uint16_t* gate_up, std::int64_t rows, std::int64_t width,
                            std::uint16_t* act, cudaStream_t stream, const LayerOptions& options) {
  return silu_mul_rows(gate_up, rows, width, act, stream, options.small_overlap);
}

cudaError_t add_bias(std::uint16_t* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  add_bias_kernel<<<rows, threads_for(cols), 0, stream>>>(y, bias, cols);
  return cudaGetLastError();
}

cudaError_t add_bias_float(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || cols < 1) return cudaErrorInvalidValue;
  add_bias_float_kernel<<<unsigned(rows), threads_for(cols), 0, stream>>>(y, bias, cols);
  return cudaGetLastError();
}

cudaError_t clamped_swiglu_interleaved(const std::uint16_t* gate_up, std::int64_t rows,
                                       std::int64_t width, float alpha, float limit,
                                       std::uint16_t* act, cudaStream_t stream,
                                       const LayerOptions& options) {
  if (rows == 0 || width == 0) return cudaSuccess;
  if (rows < 0 || width < 0) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(std::min<std::int64_t>((width + 255) / 256, 64)),
                  unsigned(std::min<std::int64_t>(rows, 65535)));
  return launch_small(clamped_swiglu_rows_kernel, grid, 256, rows, options.small_overlap, stream,
                      gate_up, rows, width, alpha, limit, act);
}

cudaError_t combine_experts(const std::uint16_t* residual, const std::uint16_t* expert_out,
                            const std::int32_t* source, const float* weight, int tokens,
                            int per_token, int dim, std::uint16_t* out, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  combine_kernel<<<tokens, threads_for(dim), 0, stream>>>(residual, expert_out, source, weight,
                                                          per_token, dim, out);
  return cudaGetLastError();
}

cudaError_t sigmoid_gate_heads(std::uint16_t* y, const std::uint16_t* gate, int rows, int heads,
                               int dim, std::int64_t gate_stride, std::int64_t gate_head_stride,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || heads < 1 || dim < 1) return cudaErrorInvalidValue;
  sigmoid_gate_heads_kernel<<<unsigned(rows), threads_for(heads * dim), 0, stream>>>(
      y, gate, heads, dim, gate_stride, gate_head_stride);
  return cudaGetLastError();
}

cudaError_t add_sigmoid_scaled_rows(std::uint16_t* x, const std::uint16_t* y, const float* scale,
                                    int rows, int dim, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || dim < 1) return cudaErrorInvalidValue;
  add_sigmoid_scaled_kernel<<<unsigned(rows), threads_for(dim), 0, stream>>>(x, y, scale, dim);
  return cudaGetLastError();
}

cudaError_t bf16_to_float(const std::uint16_t* in, std::int64_t n, float* out,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  bf16_to_float_kernel<<<grid_for(n), 256, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
