#include "kernels/attention/decode_attention.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_sink.cuh"
#include "kernels/attention/cache_slot.cuh"
#include "kernels/attention/decode_attention_plan.h"
#include "kernels/attention/kv_fp8.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/mma_sync.cuh"

namespace nibble::kernels::detail {
namespace {

namespace cg = cooperative_groups;
using decode_plan::kMaxGroup;
using decode_plan::kStepKeys;
using decode_plan::kWarps;

// Where a lane's values sit. In S^T = K Q^T the reduction runs over head_dim, so any order of the
// dimensions serves as long as K and Q use the same one: a lane (tig = lane % 4) holds D/4 values
// of each of its two keys, in 16-byte pieces spaced so that the 4 lanes of a key read contiguous
// bytes; word 2i of them is its k-step i operand for k-slots 2 tig, 2 tig + 1, word 2i + 1 for
// k-slots 2 tig + 8, + 9. In O^T += V^T P^T the M rows are dimensions: a lane (grp = lane / 4)
// holds D/8 values of each of its four keys, value 2t its row grp of m-tile t, value 2t + 1 its
// row grp + 8; the output is written back through the same map.
template <int D, bool FP8>
struct Layout {
  static constexpr int kElem = FP8 ? 1 : 2;  // bytes a cached value
  static constexpr int kLoad = 16 / kElem;   // values a 16-byte load
  static constexpr int kK = D / 4;           // K values a lane holds of a key
  static constexpr int kV = D / 8;           // V values a lane holds of a key
  static constexpr int kKPiece = kK < kLoad ? kK : kLoad;
  static constexpr int kVPiece = kV < kLoad ? kV : kLoad;
  static constexpr int kKWords = kK * kElem / 4;  // 32-bit words of a lane's K values of a key
  static constexpr int kVWords = kV * kElem / 4;
  static constexpr int kSteps = D / 16;          // k-steps of K Q^T, m-tiles of V^T P^T
  static constexpr int kSub = D <= 128 ? 2 : 1;  // mma steps a warp chunk (chunk_keys)
  // head_dim 256: V is loaded after the scores (registers: 2 x 64 K words + 4 x 32 V words).
  static constexpr bool kLateV = D > 128;
  __device__ static int k_dim(int tig, int e) {
    return (e / kKPiece) * (4 * kKPiece) + tig * kKPiece + e % kKPiece;
  }
  __device__ static int v_dim(int grp, int e) {
    return (e / kVPiece) * (8 * kVPiece) + grp * kVPiece + e % kVPiece;
  }
};

template <int Bytes>
__device__ __forceinline__ void load_piece(const std::uint8_t* src, std::uint32_t* dst) {
  static_assert(Bytes == 16 || Bytes == 8, "16- or 8-byte pieces");
  if constexpr (Bytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(src);
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    dst[0] = v.x;
    dst[1] = v.y;
  }
}

// A lane's values of one cache row (`lanes` lanes share a row, `index` among them).
template <int N, int Piece, int Elem, int Lanes>
__device__ __forceinline__ void load_row(const std::uint8_t* row, int index, std::uint32_t* words) {
  constexpr int kBytes = Piece * Elem;
#pragma unroll
  for (int q = 0; q < N / Piece; ++q)
    load_piece<kBytes>(row + (q * Lanes + index) * kBytes, words + q * (kBytes / 4));
}

// Two E4M3 codes (the low byte first) as two BF16 (exact: every E4M3 value is a BF16 value).
__device__ __forceinline__ std::uint32_t fp8x2_to_bf16x2(std::uint32_t pair) {
  const float2 f = fp8x2_to_float2(std::uint16_t(pair & 0xffffu));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const std::uint32_t*>(&b);
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&b);
}

__device__ __forceinline__ float ex2(float x) {  // 2^x; -inf gives 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The 8x8 BF16 matrix whose row lane / 4 holds columns 2 (lane % 4), + 1 in `a`, transposed.
__device__ __forceinline__ std::uint32_t transpose8x8(std::uint32_t a) {
  std::uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Asks the L2 for the K and V cache rows (kRowBytes each, at row_of(key) of k_base / v_base) of
// keys [begin, end): a hint, nothing to wait for; the block's threads take keys in turn.
template <int kRowBytes, class RowOf>
__device__ __forceinline__ void prefetch_key_rows(const std::uint8_t* k_base,
                                                  const std::uint8_t* v_base, RowOf row_of,
                                                  int begin, int end) {
  for (int key = begin + int(threadIdx.x); key < end; key += int(blockDim.x)) {
    const std::int64_t at = row_of(key) * kRowBytes;
#pragma unroll
    for (int b = 0; b < kRowBytes; b += 128) {  // 128-byte lines
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(k_base + at + b));
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(v_base + at + b));
    }
  }
}

// grid: (splits, KV heads, tiles), clusters of `cluster` consecutive splits; 4 warps. `partials`:
// splits / cluster (1: the clusters' merge is the output). Launched as a dependent launch
// (`overlap`): the block asks the L2 for its keys' cache rows before waiting for the kernel
// before (the RoPE + KV store, which writes only each row's newest key), then reads q and the
// rows after the wait.
template <int D, bool FP8>
__global__ void __launch_bounds__(kWarps * 32)
    decode_attention_kernel(PagedAttentionArgs a, int bs_shift, int cluster, int partials,
                            bool overlap) {
  kernels::allow_next_grid();  // the o projection may start fetching its weights
  using L = Layout<D, FP8>;
  constexpr int kChunk = L::kSub * kStepKeys;
  static_assert(kChunk == decode_plan::chunk_keys(D), "the plan's chunks");
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int grp = lane / 4, tig = lane % 4;
  const int kvh = int(blockIdx.y), kv_heads = a.shape.kv_heads;
  const int G = a.shape.q_heads / kv_heads;
  const AttentionTile tile = a.tiles[blockIdx.z];
  // The keys [first, position0]: a sliding window's (first > 0: the blocks before it are never
  // read) or all, split as a context of that many keys.
  const int first = decode_plan::first_key(tile.position0, a.window);
  const decode_plan::KeyRange range = decode_plan::offset(
      decode_plan::split_keys(tile.position0 + 1 - first, int(blockIdx.x), int(gridDim.x), kChunk),
      first);
  const std::int32_t* table = a.block_tables + tile.table_offset;
  // (row, head) pair of the KV head's first query head.
  const std::int64_t pair0 = std::int64_t(tile.row0) * a.shape.q_heads + std::int64_t(kvh) * G;
  const auto* k_base = reinterpret_cast<const std::uint8_t*>(
      FP8 ? static_cast<const void*>(a.k_cache8) : static_cast<const void*>(a.k_cache));
  const auto* v_base = reinterpret_cast<const std::uint8_t*>(
      FP8 ? static_cast<const void*>(a.v_cache8) : static_cast<const void*>(a.v_cache));
  constexpr std::int64_t kRowBytes = std::int64_t(D) * L::kElem;
  auto row_of = [&](int key) {
    return detail::cache_slot(table, a.block_size, key, bs_shift) * kv_heads + kvh;
  };
  // The tiles, block tables and older keys are the step's inputs and earlier steps' stores; the
  // row's newest key (position0: a decode tile is one row) and q are the kernel before's.
  if (overlap)
    prefetch_key_rows<int(kRowBytes)>(k_base, v_base, row_of, range.begin,
                                      min(range.end, tile.position0));
  kernels::wait_for_previous_grid();

  // Q^T as the B operand: query head grp (zero past the group), the lane's K dimensions.
  std::uint32_t qf[2 * L::kSteps];
  {
    const std::uint16_t* q = a.q + (pair0 + grp) * D;
#pragma unroll
    for (int w = 0; w < 2 * L::kSteps; ++w)
      qf[w] = grp < G ? *reinterpret_cast<const std::uint32_t*>(q + L::k_dim(tig, 2 * w)) : 0u;
  }
  const float score_scale = a.scale * 1.4426950408889634f;   // exp2 domain
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // heads 2 tig, 2 tig + 1
  float o[L::kSteps][4];
#pragma unroll
  for (int t = 0; t < L::kSteps; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;

  for (int c0 = range.begin + warp * kChunk; c0 < range.end; c0 += kWarps * kChunk) {
    // Every load of the chunk first (keys past the split's end repeat its last key, masked).
    std::uint32_t kw[L::kSub][2][L::kKWords];  // keys grp, grp + 8
    std::uint32_t vw[L::kSub][4][L::kVWords];  // keys 2 tig, + 1, + 8, + 9
    float k_scale[L::kSub][2], v_scale[L::kSub][2];
    auto load_v = [&](int sub) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = min(c0 + sub * kStepKeys + 2 * tig + (j & 1) + 8 * (j >> 1), range.end - 1);
        load_row<L::kV, L::kVPiece, L::kElem, 8>(v_base + row_of(key) * kRowBytes, grp, vw[sub][j]);
      }
    };
#pragma unroll
    for (int sub = 0; sub < L::kSub; ++sub) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = min(c0 + sub * kStepKeys + grp + 8 * h, range.end - 1);
        const std::int64_t row = row_of(key);
        load_row<L::kK, L::kKPiece, L::kElem, 4>(k_base + row * kRowBytes, tig, kw[sub][h]);
        if constexpr (FP8) {
          k_scale[sub][h] = bf16_bits_to_float(a.k_scale[row]);
          v_scale[sub][h] = bf16_bits_to_float(a.v_scale[row]);
        } else {
          k_scale[sub][h] = v_scale[sub][h] = 1.0f;
        }
      }
      if constexpr (!L::kLateV) load_v(sub);
    }
#pragma unroll
    for (int sub = 0; sub < L::kSub; ++sub) {
      const int k0 = c0 + sub * kStepKeys;
      if (k0 >= range.end) break;  // warp-uniform
      // The K operand's word w of key grp + 8 h, as BF16 pairs.
      auto k_word = [&](int h, int w) {
        if constexpr (FP8)
          return fp8x2_to_bf16x2(kw[sub][h][w / 2] >> (16 * (w % 2)));
        else
          return kw[sub][h][w];
      };
      // S^T: rows keys grp, grp + 8; columns heads 2 tig, 2 tig + 1. Two accumulators halve the
      // chain of dependent mma.
      float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < L::kSteps; ++i) {
        const std::uint32_t k_frag[4] = {k_word(0, 2 * i), k_word(1, 2 * i), k_word(0, 2 * i + 1),
                                         k_word(1, 2 * i + 1)};
        mma_bf16(i % 2 ? sb : sa, k_frag, qf[2 * i], qf[2 * i + 1]);
      }
      if constexpr (L::kLateV) load_v(sub);
      float s[4], p[4], alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool live = k0 + grp + 8 * h < range.end;
        const float f = score_scale * k_scale[sub][h];
        s[2 * h] = live ? (sa[2 * h] + sb[2 * h]) * f : -INFINITY;
        s[2 * h + 1] = live ? (sa[2 * h + 1] + sb[2 * h + 1]) * f : -INFINITY;
      }
      // Online softmax per head over the 16 keys (the 8 lanes of a tig hold them).
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float mx = fmaxf(s[j], s[2 + j]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float m_new = fmaxf(m[j], mx);
        const float base = m_new == -INFINITY ? 0.0f : m_new;
        alpha[j] = ex2(m[j] - base);
        p[j] = ex2(s[j] - base);
        p[2 + j] = ex2(s[2 + j] - base);
        l[j] = l[j] * alpha[j] + p[j] + p[2 + j];
        m[j] = m_new;
      }
#pragma unroll
      for (int t = 0; t < L::kSteps; ++t) {
        o[t][0] *= alpha[0];
        o[t][1] *= alpha[1];
        o[t][2] *= alpha[0];
        o[t][3] *= alpha[1];
      }
      // P^T as the B operand: the FP8 rows' value scales folded into the probabilities.
      const std::uint32_t b0 =
          transpose8x8(pack_bf16(p[0] * v_scale[sub][0], p[1] * v_scale[sub][0]));
      const std::uint32_t b1 =
          transpose8x8(pack_bf16(p[2] * v_scale[sub][1], p[3] * v_scale[sub][1]));
#pragma unroll
      for (int t = 0; t < L::kSteps; ++t) {
        std::uint32_t v_frag[4];
        if constexpr (FP8) {
          const int w = t / 2;
          const std::uint32_t sel = t % 2 ? 0x7362u : 0x5140u;
          const std::uint32_t lo = __byte_perm(vw[sub][0][w], vw[sub][1][w], sel);
          const std::uint32_t hi = __byte_perm(vw[sub][2][w], vw[sub][3][w], sel);
          v_frag[0] = fp8x2_to_bf16x2(lo);
          v_frag[1] = fp8x2_to_bf16x2(lo >> 16);
          v_frag[2] = fp8x2_to_bf16x2(hi);
          v_frag[3] = fp8x2_to_bf16x2(hi >> 16);
        } else {
          v_frag[0] = __byte_perm(vw[sub][0][t], vw[sub][1][t], 0x5410u);
          v_frag[1] = __byte_perm(vw[sub][0][t], vw[sub][1][t], 0x7632u);
          v_frag[2] = __byte_perm(vw[sub][2][t], vw[sub][3][t], 0x5410u);
          v_frag[3] = __byte_perm(vw[sub][2][t], vw[sub][3][t], 0x7632u);
        }
        mma_bf16(o[t], v_frag, b0, b1);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 4);
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 8);
    l[j] += __shfl_xor_sync(0xffffffffu, l[j], 16);
  }

  // The warps' partial softmaxes (max in exp2 units, sum, unnormalised O), merged over the block.
  // Rows padded by one float: a warp's stores (8 dimension groups x 4 head pairs) spread over 16
  // banks instead of 4.
  __shared__ float o_s[kWarps][kMaxGroup][D + 1];
  __shared__ float m_s[kWarps][kMaxGroup], l_s[kWarps][kMaxGroup];
  // The block's merge for the cluster, [head][dim], and its m and l per head; the cluster's blocks
  // read each other's (the pull merge below).
  __shared__ float block_o[kMaxGroup * D];
  __shared__ float block_m[kMaxGroup], block_l[kMaxGroup];
#pragma unroll
  for (int t = 0; t < L::kSteps; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        o_s[warp][2 * tig + j][L::v_dim(grp, 2 * t + h)] = o[t][2 * h + j];
  if (grp == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      m_s[warp][2 * tig + j] = m[j];
      l_s[warp][2 * tig + j] = l[j];
    }
  }
  __syncthreads();
  // An output from its merged partial softmax: the result, or a partial for the merge kernel
  // ([partial][row, head][D unnormalised sums, running max (natural units), running sum]).
  auto finish = [&](int g, int d, float num, float den, float mx) {
    if (partials == 1) {
      const float f = softmax_row_factor(den, mx, a.sinks, kvh * G + g);  // mx: exp2 units
      a.out[(pair0 + g) * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(num * f));
      return;
    }
    float* part =
        a.workspace +
        (std::int64_t(blockIdx.x) / cluster * a.rows * a.shape.q_heads + pair0 + g) * (D + 2);
    part[d] = num;
    if (d == 0) {
      part[D] = mx * 0.6931471805599453f;
      part[D + 1] = den;
    }
  };
  const bool whole = cluster == 1;  // one split: this block holds every key
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::cluster_group cl = cg::this_cluster();
  const int rank = whole ? 0 : int(cl.block_rank());
#else
  const int rank = 0;
#endif
  for (int e = int(threadIdx.x); e < G * D; e += int(blockDim.x)) {
    const int g = e / D, d = e % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = m_s[w][g] == -INFINITY ? 0.0f : ex2(m_s[w][g] - mx);
      num += f * o_s[w][g][d];
      den += f * l_s[w][g];
    }
    if (whole) {
      finish(g, d, num, den, mx);
    } else {
      block_o[e] = num;
      if (d == 0) {
        block_m[g] = mx;
        block_l[g] = den;
      }
    }
  }
  if (whole) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cl.sync();  // every block's merge is in place and visible
  // Pull: each block a share of the outputs, read from every block's memory; the second barrier
  // keeps every block's shared memory alive until all have read it.
  for (int e = rank * int(blockDim.x) + int(threadIdx.x); e < G * D;
       e += cluster * int(blockDim.x)) {
    const int g = e / D, d = e % D;
    float mx = -INFINITY;
    for (int b = 0; b < cluster; ++b) mx = fmaxf(mx, cl.map_shared_rank(&block_m[0], b)[g]);
    float num = 0.0f, den = 0.0f;
    for (int b = 0; b < cluster; ++b) {
      const float mb = cl.map_shared_rank(&block_m[0], b)[g];
      const float f = mb == -INFINITY ? 0.0f : ex2(mb - mx);
      num += f * cl.map_shared_rank(&block_o[0], b)[e];
      den += f * cl.map_shared_rank(&block_l[0], b)[g];
    }
    finish(g, d, num, den, mx);
  }
  cl.sync();
#endif
}

using Kernel = void (*)(PagedAttentionArgs, int, int, int, bool);

template <bool FP8>
Kernel kernel_for(int head_dim) {
  switch (head_dim) {
    case 64:
      return decode_attention_kernel<64, FP8>;
    case 128:
      return decode_attention_kernel<128, FP8>;
    case 256:
      return decode_attention_kernel<256, FP8>;
    default:
      return nullptr;
  }
}

bool clusters_available() {
  static const bool available = [] {
    int device = 0, cluster = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return cluster != 0;
  }();
  return available;
}

}  // namespace

bool decode_attention_supported(const AttentionShape& s) {
  if (s.kv_heads <= 0 || s.q_heads % s.kv_heads != 0) return false;
  const int group = s.q_heads / s.kv_heads;
  return group >= 1 && group <= kMaxGroup && kernel_for<false>(s.head_dim) != nullptr &&
         s.kv_heads <= 65535 && clusters_available();
}

cudaError_t decode_attention(const PagedAttentionArgs& a, int splits, int bs_shift, int* partials,
                             cudaStream_t stream) {
  const AttentionShape& s = a.shape;
  const bool fp8 = a.k_cache8 != nullptr;
  const Kernel kernel = fp8 ? kernel_for<true>(s.head_dim) : kernel_for<false>(s.head_dim);
  if (!decode_attention_supported(s) || kernel == nullptr || a.num_tiles != a.rows ||
      a.num_tiles > 65535)
    return cudaErrorInvalidValue;
  splits = decode_plan::pow2_at_most(std::max(splits, 1));
  const std::size_t need = std::size_t(decode_plan::partials(splits)) * std::size_t(a.rows) *
                           std::size_t(s.q_heads) * std::size_t(s.head_dim + 2);
  if (decode_plan::partials(splits) > 1 && (a.workspace == nullptr || a.workspace_floats < need))
    splits = decode_plan::cluster_size(splits);  // the clusters alone: no workspace needed
  const int cluster = decode_plan::cluster_size(splits);
  *partials = decode_plan::partials(splits);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(splits), unsigned(s.kv_heads), unsigned(a.num_tiles));
  config.blockDim = dim3(kWarps * 32);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  const bool overlap = a.options.decode_overlap;
  cudaLaunchAttribute attribute[2];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = unsigned(cluster);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = overlap ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, a, bs_shift, cluster, *partials, overlap);
}

}  // namespace nibble::kernels::detail
