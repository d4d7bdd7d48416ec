#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "kernels/attention/attention_sink.cuh"
#include "kernels/attention/cache_slot.cuh"
#include "kernels/attention/decode_attention.h"
#include "kernels/attention/decode_attention_plan.h"
#include "kernels/attention/flash_prefill.h"
#include "kernels/attention/kv_fp8.cuh"
#include "kernels/attention/paged_attention.h"
#include "kernels/dependent_launch.cuh"

namespace nibble::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kKeys = 32;    // keys per chunk: one per lane in the softmax
constexpr int kMaxAcc = 32;  // output elements per thread: queries x head_dim <= 4096
constexpr int kMaxQueries = kThreads * kMaxAcc;
constexpr int kMaxRowsPerTile = 16;

struct Plan {
  int heads_per_block, head_parts, rows_per_tile;
};

Plan plan_for(const AttentionShape& s) {
  const int group = s.q_heads / s.kv_heads;
  const int heads = std::max(1, std::min(group, kMaxQueries / s.head_dim));
  const int rows = std::clamp(kMaxQueries / s.head_dim / heads, 1, kMaxRowsPerTile);
  return {heads, (group + heads - 1) / heads, rows};
}

__device__ __forceinline__ float2 unpack(std::uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// K/V rows in shared memory: D/2 words plus 4 of padding, so that the 16-byte reads of the score
// loop (8 lanes per phase, one key each) fall in distinct banks and cp.async can write whole
// 16-byte vectors.
__host__ __device__ constexpr int row_stride(int head_dim) {
  return head_dim / 2 + 4;
}

// Starts copying chunk c0's keys and values into buffer (k_s, v_s); keys outside [first, last] are
// zero-filled, their block-table entries not read. One thread per 16-byte vector: kKeys * D/8 per
// tensor.
__device__ void load_chunk(const PagedAttentionArgs& a, const std::int32_t* table, int kvh, int c0,
                           int first, int last, std::uint32_t* k_s, std::uint32_t* v_s) {
  const int D = a.shape.head_dim, vecs = D / 8, stride = row_stride(D);
  for (int e = threadIdx.x; e < kKeys * vecs; e += kThreads) {
    const int j = e / vecs, v = e % vecs, key = c0 + j;
    const bool live = key <= last && key >= first;
    std::int64_t at = 0;
    if (live) {
      const std::int64_t slot =
          std::int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
      at = (slot * a.shape.kv_heads + kvh) * vecs + v;
    }
    const uint4* ksrc = reinterpret_cast<const uint4*>(a.k_cache) + at;
    const uint4* vsrc = reinterpret_cast<const uint4*>(a.v_cache) + at;
    const unsigned kdst = unsigned(__cvta_generic_to_shared(k_s + j * stride + 4 * v));
    const unsigned vdst = unsigned(__cvta_generic_to_shared(v_s + j * stride + 4 * v));
    const int bytes = live ? 16 : 0;  // 0: the destination is zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kdst), "l"(ksrc),
                 "r"(bytes));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(vdst), "l"(vsrc),
                 "r"(bytes));
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

// grid: (tiles, kv heads x head parts). Shared memory: q (FP32, pre-scaled), two buffers of K and
// V chunk rows (the next chunk is in flight while this one is used), the chunk's scores /
// probabilities, and each query's running max and sum.
__global__ void __launch_bounds__(kThreads)
    paged_attention_kernel(PagedAttentionArgs a, Plan plan) {
  // The o projection may follow: it fetches its first weights while this runs (every block of
  // this kernel is resident once all have passed here).
  kernels::allow_next_grid();
  extern __shared__ __align__(16) float smem[];
  const int D = a.shape.head_dim, stride = row_stride(D);
  const int group = a.shape.q_heads / a.shape.kv_heads;
  const int kvh = blockIdx.y / plan.head_parts, part = blockIdx.y % plan.head_parts;
  const AttentionTile tile = a.tiles[blockIdx.x];
  const int HB = plan.heads_per_block, NQ = plan.rows_per_tile * HB;
  const int live = tile.rows * HB;  // queries that exist: a decode tile has one row
  auto* kv_s = reinterpret_cast<std::uint32_t*>(smem);  // [2 buffers][K, V][kKeys][stride]
  const int buffer_words = 2 * kKeys * stride;
  float* q_s = smem + 2 * buffer_words;  // [NQ][D]
  float* p_s = q_s + NQ * D;             // [NQ][kKeys]
  float* m_s = p_s + NQ * kKeys;         // [NQ]
  float* l_s = m_s + NQ;                 // [NQ]
  float* alpha_s = l_s + NQ;             // [NQ]

  const int last = tile.position0 + tile.rows - 1;
  const std::int32_t* table = a.block_tables + tile.table_offset;
  // This block's share of the chunks covering keys [first, last] (all of them unless split; first:
  // the tile's first row's window start, else 0).
  const int first = decode_plan::first_key(tile.position0, a.window), c_first = first / kKeys;
  const int splits = gridDim.z, chunks = last / kKeys + 1 - c_first,
            per = (chunks + splits - 1) / splits;
  const int c_begin = (c_first + int(blockIdx.z) * per) * kKeys,
            c_end = (c_first + min(chunks, int(blockIdx.z + 1) * per)) * kKeys;
  if (c_begin < c_end) load_chunk(a, table, kvh, c_begin, first, last, kv_s, kv_s + kKeys * stride);

  // Query qv = r * HB + hh: row row0 + r, head kvh * group + part * HB + hh.
  auto valid = [&](int qv) { return qv / HB < tile.rows && part * HB + qv % HB < group; };
  auto q_offset = [&](int qv) {
    const std::int64_t row = tile.row0 + qv / HB;
    return (row * a.shape.q_heads + kvh * group + part * HB + qv % HB) * std::int64_t(D);
  };
  for (int e = threadIdx.x; e < live * D; e += kThreads) {
    const int qv = e / D;
    q_s[e] = valid(qv) ? __bfloat162float(__ushort_as_bfloat16(a.q[q_offset(qv) + e % D])) * a.scale
                       : 0.0f;
  }
  for (int qv = threadIdx.x; qv < NQ; qv += kThreads) {
    m_s[qv] = -INFINITY;
    l_s[qv] = 0.0f;
  }
  float acc[kMaxAcc];
#pragma unroll
  for (int i = 0; i < kMaxAcc; ++i) acc[i] = 0.0f;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int c0 = c_begin, buf = 0; c0 < c_end; c0 += kKeys, buf ^= 1) {
    const std::uint32_t* k_s = kv_s + buf * buffer_words;
    const std::uint32_t* v_s = k_s + kKeys * stride;
    if (c0 + kKeys < c_end) {  // the next chunk into the other buffer, then wait for this one
      std::uint32_t* next = kv_s + (buf ^ 1) * buffer_words;
      load_chunk(a, table, kvh, c0 + kKeys, first, last, next, next + kKeys * stride);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();  // this chunk is in for every thread (and q_s, m_s are initialised)
    for (int e = threadIdx.x; e < live * kKeys; e += kThreads) {
      const int qv = e / kKeys, j = e % kKeys, key = c0 + j;
      float s = -INFINITY;
      const int pos = tile.position0 + qv / HB;
      if (valid(qv) && key <= pos && (a.window == 0 || key > pos - a.window)) {
        const float4* qr = reinterpret_cast<const float4*>(q_s + qv * D);
        const uint4* kr = reinterpret_cast<const uint4*>(k_s + j * stride);
        s = 0.0f;
        for (int v = 0; v < D / 8; ++v) {
          const uint4 k8 = kr[v];
          const float4 qa = qr[2 * v], qb = qr[2 * v + 1];
          const float2 k0 = unpack(k8.x), k1 = unpack(k8.y), k2 = unpack(k8.z), k3 = unpack(k8.w);
          s = fmaf(qa.x, k0.x, s);
          s = fmaf(qa.y, k0.y, s);
          s = fmaf(qa.z, k1.x, s);
          s = fmaf(qa.w, k1.y, s);
          s = fmaf(qb.x, k2.x, s);
          s = fmaf(qb.y, k2.y, s);
          s = fmaf(qb.z, k3.x, s);
          s = fmaf(qb.w, k3.y, s);
        }
      }
      p_s[e] = s;
    }
    __syncthreads();
    // Online softmax: one warp per query, one lane per key.
    for (int qv = warp; qv < live; qv += kThreads / 32) {
      const float s = p_s[qv * kKeys + lane];
      float mx = s;
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = m_s[qv], m_new = fmaxf(m_old, mx);
      const float p = s == -INFINITY ? 0.0f : __expf(s - m_new);
      float sum = p;
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      p_s[qv * kKeys + lane] = p;
      __syncwarp();
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
        alpha_s[qv] = alpha;
        l_s[qv] = l_s[qv] * alpha + sum;
        m_s[qv] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxAcc; ++i) {
      const int e = threadIdx.x + kThreads * i;
      if (e < live * D) {
        const int qv = e / D, d = e % D;
        const float* pr = p_s + qv * kKeys;
        const std::uint32_t* vc = v_s + d / 2;
        float v = acc[i] * alpha_s[qv];
        for (int j = 0; j < kKeys; ++j) {
          const float2 v2 = unpack(vc[j * stride]);
          v = fmaf(pr[j], d % 2 ? v2.y : v2.x, v);
        }
        acc[i] = v;
      }
    }
    __syncthreads();  // buffer `buf` and p_s are free for the next chunk's copies and scores
  }
  __syncthreads();  // m_s, l_s final (also when this block had no chunk)
  if (splits == 1) {
#pragma unroll
    for (int i = 0; i < kMaxAcc; ++i) {
      const int e = threadIdx.x + kThreads * i;
      if (e < live * D && valid(e / D)) {
        const int qv = e / D;
        const float f = detail::softmax_row_factor(l_s[qv], m_s[qv] * 1.4426950408889634f, a.sinks,
                                                   kvh * group + part * HB + qv % HB);
        a.out[q_offset(qv) + e % D] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[i] * f));
      }
    }
    return;
  }
  // Partial results: [split][row, head][D unnormalised sums, running max, running sum].
  auto partial = [&](int qv) {
    return a.workspace +
           (std::int64_t(blockIdx.z) * a.rows * a.shape.q_heads + q_offset(qv) / D) * (D + 2);
  };
#pragma unroll
  for (int i = 0; i < kMaxAcc; ++i) {
    const int e = threadIdx.x + kThreads * i;
    if (e < live * D && valid(e / D)) partial(e / D)[e % D] = acc[i];
  }
  for (int qv = threadIdx.x; qv < live; qv += kThreads) {
    if (!valid(qv)) continue;
    partial(qv)[D] = m_s[qv];
    partial(qv)[D + 1] = l_s[qv];
  }
}

// One block per (row, head): the splits' partial softmaxes rescaled to their common max, summed,
// the head's sink (if any) joining the denominator.
__global__ void merge_splits_kernel(const float* workspace, int splits, std::int64_t pairs, int D,
                                    const float* sinks, int q_heads, std::uint16_t* out) {
  kernels::allow_next_grid();  // the o projection follows
  const std::int64_t pair = blockIdx.x;
  float m = -INFINITY;
  for (int z = 0; z < splits; ++z) m = fmaxf(m, workspace[(z * pairs + pair) * (D + 2) + D]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int z = 0; z < splits; ++z) {
      const float* part = workspace + (z * pairs + pair) * (D + 2);
      const float w = part[D] == -INFINITY ? 0.0f : __expf(part[D] - m);
      num += w * part[d];
      den += w * part[D + 1];
    }
    const float f =
        detail::softmax_row_factor(den, m * 1.4426950408889634f, sinks, int(pair % q_heads));
    out[pair * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(num * f));
  }
}

// Decode steps (every tile one row): flash-decoding with the lanes of a warp across head_dim
// and all G query heads of a KV head in registers, so that every key and value row is read from
// the cache once, coalesced, and no shared-memory staging or block barrier sits between a load
// and its use. Each warp takes decode_keys() keys at a time (their loads in flight together:
// at long contexts the kernel is bound by the loads in flight, not by bandwidth),
// warps stride over the block's share of the keys, and the warps' partial softmaxes are merged
// at the end (then across splits by merge_splits_kernel, as for the tile kernel). The tile
// kernel above spent ~33 us per layer on a 512-token decode of Llama-3.1-8B on an H200 (its
// staging and barriers serialise a few short chunks); this one reads the same bytes.
constexpr int kDecodeWarps = 4;
constexpr int kDecodeMaxPerLane = 64;  // G * head_dim / 32 accumulators per lane
// Keys per warp step: 8 where the G x DL query and accumulator registers leave room, else 4.
__host__ __device__ constexpr int decode_keys(int G, int DL) {
  return G * DL <= 32 ? 8 : 4;
}

template <int DL>
struct LaneVector;  // DL consecutive BF16 values
template <>
struct LaneVector<2> {
  using type = std::uint32_t;
};
template <>
struct LaneVector<4> {
  using type = uint2;
};
template <>
struct LaneVector<8> {
  using type = uint4;
};

template <int DL>
struct Fp8Vector;  // DL consecutive E4M3 codes
template <>
struct Fp8Vector<2> {
  using type = std::uint16_t;
};
template <>
struct Fp8Vector<4> {
  using type = std::uint32_t;
};
template <>
struct Fp8Vector<8> {
  using type = uint2;
};

template <int DL>
__device__ __forceinline__ void unpack_fp8_lane(const typename Fp8Vector<DL>::type& v, float scale,
                                                float* out) {
  const auto* pairs = reinterpret_cast<const std::uint16_t*>(&v);
#pragma unroll
  for (int i = 0; i < DL / 2; ++i) {
    const float2 f = fp8x2_to_float2(pairs[i]);
    out[2 * i] = f.x * scale;
    out[2 * i + 1] = f.y * scale;
  }
}

template <int DL>
__device__ __forceinline__ void unpack_lane(const typename LaneVector<DL>::type& v, float* out) {
  const auto* words = reinterpret_cast<const std::uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < DL / 2; ++i) {
    const float2 f = unpack(words[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid: (tiles, kv heads, splits); G query heads per KV head, DL = head_dim / 32 values per lane.
// In a mixed step (only_single_rows) it takes the tiles of one row and leaves the others to the
// flash kernel.
template <int G, int DL, bool FP8>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    paged_decode_kernel(PagedAttentionArgs a, bool only_single_rows, int bs_shift) {
  kernels::allow_next_grid();  // the o projection may start fetching its weights
  constexpr int D = DL * 32;
  using Vec = typename LaneVector<DL>::type;
  using Raw = std::conditional_t<FP8, typename Fp8Vector<DL>::type, Vec>;  // as the cache holds it
  constexpr int kDecodeKeys = decode_keys(G, DL);
  const int kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const AttentionTile tile = a.tiles[blockIdx.x];
  if (only_single_rows && tile.rows != 1) return;
  const std::int32_t* table = a.block_tables + tile.table_offset;
  // Keys [first, position0]: the window's (first > 0) or all, split over the blocks.
  const int first = decode_plan::first_key(tile.position0, a.window);
  const int keys = tile.position0 + 1 - first, splits = gridDim.z;
  const int per = (keys + splits - 1) / splits;
  const int k_begin = first + int(blockIdx.z) * per, k_end = min(first + keys, k_begin + per);

  float q[G][DL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const std::int64_t at =
        (std::int64_t(tile.row0) * a.shape.q_heads + kvh * G + g) * D + lane * DL;
    unpack_lane<DL>(*reinterpret_cast<const Vec*>(a.q + at), q[g]);
#pragma unroll
    for (int d = 0; d < DL; ++d) q[g][d] *= a.scale;
  }
  float m[G], l[G], acc[G][DL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < DL; ++d) acc[g][d] = 0.0f;
  }

  for (int k0 = k_begin + warp * kDecodeKeys; k0 < k_end; k0 += kDecodeWarps * kDecodeKeys) {
    Raw kv[kDecodeKeys], vv[kDecodeKeys];
    float ks[kDecodeKeys], vs[kDecodeKeys];  // FP8 rows' scales
#pragma unroll
    for (int j = 0; j < kDecodeKeys; ++j) {
      const int key = min(k0 + j, k_end - 1);  // past the end: a repeat, masked below
      const std::int64_t row =
          detail::cache_slot(table, a.block_size, key, bs_shift) * a.shape.kv_heads + kvh;
      if constexpr (FP8) {
        kv[j] = *reinterpret_cast<const Raw*>(a.k_cache8 + row * D + lane * DL);
        vv[j] = *reinterpret_cast<const Raw*>(a.v_cache8 + row * D + lane * DL);
        ks[j] = bf16_bits_to_float(a.k_scale[row]);
        vs[j] = bf16_bits_to_float(a.v_scale[row]);
      } else {
        kv[j] = *reinterpret_cast<const Raw*>(a.k_cache + row * D + lane * DL);
        vv[j] = *reinterpret_cast<const Raw*>(a.v_cache + row * D + lane * DL);
        ks[j] = vs[j] = 1.0f;
      }
    }
    auto unpack = [&](const Raw& raw, float scale, float* out) {
      if constexpr (FP8)
        unpack_fp8_lane<DL>(raw, scale, out);
      else
        unpack_lane<DL>(raw, out);
    };
    float s[G][kDecodeKeys];
#pragma unroll
    for (int j = 0; j < kDecodeKeys; ++j) {
      float k[DL];
      unpack(kv[j], ks[j], k);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < DL; ++d) dot = fmaf(q[g][d], k[d], dot);
        s[g][j] = k0 + j < k_end ? warp_sum(dot) : -INFINITY;
      }
    }
    float v[kDecodeKeys][DL];
#pragma unroll
    for (int j = 0; j < kDecodeKeys; ++j) unpack(vv[j], vs[j], v[j]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = m[g];
#pragma unroll
      for (int j = 0; j < kDecodeKeys; ++j) mx = fmaxf(mx, s[g][j]);
      const float alpha = m[g] == -INFINITY ? 0.0f : __expf(m[g] - mx);
      float p[kDecodeKeys], sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kDecodeKeys; ++j)
        sum += p[j] = s[g][j] == -INFINITY ? 0.0f : __expf(s[g][j] - mx);
      l[g] = l[g] * alpha + sum;
      m[g] = mx;
#pragma unroll
      for (int d = 0; d < DL; ++d) {
        float o = acc[g][d] * alpha;
#pragma unroll
        for (int j = 0; j < kDecodeKeys; ++j) o = fmaf(p[j], v[j][d], o);
        acc[g][d] = o;
      }
    }
  }

  // The warps' partial softmaxes, merged over the block.
  __shared__ float m_s[kDecodeWarps][G], l_s[kDecodeWarps][G];
  __shared__ float acc_s[kDecodeWarps][G][D];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      m_s[warp][g] = m[g];
      l_s[warp][g] = l[g];
    }
#pragma unroll
    for (int d = 0; d < DL; ++d) acc_s[warp][g][lane * DL + d] = acc[g][d];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += blockDim.x) {
    const int g = e / D, d = e % D;
    float mx = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
    float num = 0.0f, den = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = m_s[w][g] == -INFINITY ? 0.0f : __expf(m_s[w][g] - mx);
      num += f * acc_s[w][g][d];
      den += f * l_s[w][g];
    }
    const std::int64_t pair = std::int64_t(tile.row0) * a.shape.q_heads + kvh * G + g;
    if (splits == 1) {
      const float f =
          detail::softmax_row_factor(den, mx * 1.4426950408889634f, a.sinks, kvh * G + g);
      a.out[pair * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(num * f));
      continue;
    }
    // [split][row, head][D unnormalised sums, running max, running sum], as merge_splits reads.
    float* part =
        a.workspace + (std::int64_t(blockIdx.z) * a.rows * a.shape.q_heads + pair) * (D + 2);
    part[d] = num;
    if (d == 0) {
      part[D] = mx;
      part[D + 1] = den;
    }
  }
}

using DecodeKernel = void (*)(PagedAttentionArgs, bool, int);

template <int DL, bool FP8>
DecodeKernel decode_kernel_for_group(int group) {
  switch (group) {
    case 1:
      return paged_decode_kernel<1, DL, FP8>;
    case 2:
      return paged_decode_kernel<2, DL, FP8>;
    case 4:
      return paged_decode_kernel<4, DL, FP8>;
    case 8:
      return (8 * DL <= kDecodeMaxPerLane) ? paged_decode_kernel<8, DL, FP8> : nullptr;
    default:
      return nullptr;
  }
}

template <bool FP8>
DecodeKernel decode_kernel_for_dtype(const AttentionShape& s) {
  const int group = s.q_heads / s.kv_heads;
  switch (s.head_dim) {
    case 64:
      return decode_kernel_for_group<2, FP8>(group);
    case 128:
      return decode_kernel_for_group<4, FP8>(group);
    case 256:
      return decode_kernel_for_group<8, FP8>(group);
    default:
      return nullptr;
  }
}

// The decode kernel for a shape and cache type, or nullptr where it has none (the tile kernel
// runs instead; an FP8 cache needs one).
DecodeKernel decode_kernel_for(const AttentionShape& s, bool fp8) {
  return fp8 ? decode_kernel_for_dtype<true>(s) : decode_kernel_for_dtype<false>(s);
}

std::size_t smem_bytes(const AttentionShape& s, const Plan& plan) {
  const std::size_t nq = std::size_t(plan.rows_per_tile) * plan.heads_per_block;
  return (nq * s.head_dim + nq * kKeys + 3 * nq) * sizeof(float) +
         4 * std::size_t(kKeys) * std::size_t(row_stride(s.head_dim)) * sizeof(std::uint32_t);
}

// Steps of decodes only run the flash kernel (tensor cores; a KV head's query heads fill G of its
// rows) where it serves the shape: the decode kernel is bound by the dependent latency of its
// per-key reductions (H200, one call: Llama-3.1-8B at 4,096 context 328.7 vs 317.8 tok/s,
// Qwen3-30B-A3B at 512 246.6 vs 243.1). AttentionOptions::flash_decode = false keeps the decode
// kernel.
bool flash_decode_for(const AttentionShape& s, int choice, const AttentionOptions& options) {
  const bool wanted = choice < 0 ? options.flash_decode && options.flash : choice > 0;
  return wanted && detail::flash_prefill_supported(s);
}

// Steps of decodes only run the decode attention kernel (decode_attention.h) where it serves the
// shape, unless the call or the options turn it off.
bool decode_attention_for(const AttentionShape& s, int choice, const AttentionOptions& options) {
  const bool wanted = choice < 0 ? options.decode_attention : choice > 0;
  return wanted && detail::decode_attention_supported(s);
}

// The decode attention split rule's blocks a multiprocessor at long contexts: the options' (1..8)
// or the rule's default.
int decode_attention_blocks_per_sm(const AttentionOptions& options) {
  const int n = options.decode_blocks_per_sm;
  return n >= 1 && n <= 8 ? n : decode_plan::kBlocksPerSm;
}

}  // namespace

bool paged_attention_fp8_supported(const AttentionShape& shape) {
  return shape.kv_heads > 0 && shape.q_heads % shape.kv_heads == 0 &&
         decode_kernel_for(shape, true) != nullptr && detail::flash_prefill_supported(shape);
}

int attention_rows_per_tile(const AttentionShape& shape, const AttentionOptions& options) {
  // Flash tiles hold more rows than the tile kernel's; the flash kernel takes shorter tiles too
  // (an FP8 cache without options.flash).
  return options.flash && detail::flash_prefill_supported(shape)
             ? detail::flash_prefill_rows_per_tile(shape)
             : plan_for(shape).rows_per_tile;
}

namespace {

// The largest power of two <= n and the smallest >= n (n >= 1): split counts are powers of two.
int pow2_at_most(std::int64_t n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
int pow2_at_least(std::int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

int paged_attention_splits(const AttentionShape& shape, int num_tiles, int max_position,
                           int sm_count) {
  const Plan plan = plan_for(shape);
  const std::int64_t blocks = std::int64_t(num_tiles) * shape.kv_heads * plan.head_parts;
  const int chunks = max_position / kKeys + 1;
  if (sm_count <= 0 || blocks >= sm_count || chunks < 4) return 1;
  // About four blocks per SM (the decode kernel at long contexts is bound by the loads it has in
  // flight), each with at least two chunks of keys.
  const std::int64_t want = (4 * std::int64_t(sm_count) + blocks - 1) / blocks;
  return pow2_at_most(std::clamp<std::int64_t>(std::min<std::int64_t>(want, chunks / 2), 1, 128));
}

int paged_decode_splits(const AttentionShape& shape, int rows, int max_position, int sm_count,
                        int flash_decode, int decode_attention, const AttentionOptions& options) {
  if (decode_attention_for(shape, decode_attention, options))
    return decode_plan::splits(shape.kv_heads, shape.head_dim, rows, max_position, sm_count,
                               decode_attention_blocks_per_sm(options));
  const int G = shape.q_heads / std::max(1, shape.kv_heads), DL = shape.head_dim / 32;
  const int keys = max_position + 1;
  const std::int64_t blocks = std::int64_t(rows) * shape.kv_heads;
  if (sm_count <= 0 || blocks >= sm_count || G < 1 || DL < 1) return 1;
  // The flash kernel: two 64-key chunks a split, two blocks a multiprocessor (its shared memory).
  const bool flash = flash_decode_for(shape, flash_decode, options);
  const int step_keys = flash ? 128 : kDecodeWarps * decode_keys(G, DL);
  const std::int64_t per_sm = flash ? 2 : 4;
  const std::int64_t want = std::min<std::int64_t>((per_sm * sm_count + blocks - 1) / blocks, 128);
  const std::int64_t steps = (keys + step_keys - 1) / step_keys;
  // Rounded up over the keys (every warp busy once, none twice: 66 keys -> 4 splits of 17), down
  // over the blocks wanted.
  return std::min(pow2_at_least(steps), pow2_at_most(std::max<std::int64_t>(want, 1)));
}

std::size_t paged_attention_workspace_floats(const AttentionShape& shape, int rows, int splits) {
  if (splits <= 1) return 0;
  return std::size_t(splits) * std::size_t(rows) * std::size_t(shape.q_heads) *
         std::size_t(shape.head_dim + 2);
}

cudaError_t paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
  const AttentionShape& s = a.shape;
  if (s.head_dim <= 0 || s.head_dim % 8 != 0 || s.head_dim > 256 || s.kv_heads <= 0 ||
      s.q_heads % s.kv_heads != 0 || a.block_size <= 0) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tiles == 0) return cudaSuccess;
  if (a.window < 0) return cudaErrorInvalidValue;
  const std::int64_t pairs = std::int64_t(a.rows) * s.q_heads;
  // The split counts follow the keys a row sees: a decode's at most `window` of them.
  const bool decode_only = a.num_tiles == a.rows;
  const int max_position =
      decode_only && a.window > 0 ? std::min(a.max_position, a.window - 1) : a.max_position;
  // A step of decodes only: the decode attention kernel, its clusters merging up to 8 splits, the
  // merge kernel any partials they leave.
  if (decode_only && a.num_tiles <= 65535 &&
      decode_attention_for(s, a.decode_attention, a.options)) {
    const int splits =
        a.splits > 0 ? a.splits
                     : decode_plan::splits(s.kv_heads, s.head_dim, a.rows, max_position, a.sm_count,
                                           decode_attention_blocks_per_sm(a.options));
    int partials = 1;
    const cudaError_t err = detail::decode_attention(
        a, splits, detail::block_shift(a.block_size, detail::flash_options(a)), &partials, stream);
    if (err != cudaSuccess || partials == 1) return err;
    merge_splits_kernel<<<unsigned(pairs), std::min(s.head_dim, 128), 0, stream>>>(
        a.workspace, partials, pairs, s.head_dim, a.sinks, s.q_heads, a.out);
    return cudaGetLastError();
  }
  const Plan plan = plan_for(s);
  const std::size_t smem = smem_bytes(s, plan);
  // Above 48 KB the kernel must opt in; once per size, not on every layer of every step.
  static std::atomic<std::size_t> opted_in{48 * 1024};
  if (smem > opted_in.load(std::memory_order_relaxed)) {
    const cudaError_t err = cudaFuncSetAttribute(
        paged_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
    opted_in.store(smem, std::memory_order_relaxed);
  }
  int splits =
      a.splits > 0 ? a.splits : paged_attention_splits(s, a.num_tiles, max_position, a.sm_count);
  if (a.workspace == nullptr ||
      a.workspace_floats < paged_attention_workspace_floats(s, a.rows, splits))
    splits = 1;
  // A step of decodes only (one row per tile) takes the decode kernel where the shape has one;
  // other steps the flash kernel where the shape has one (the decode kernel taking their tiles of
  // one row), else the tile kernel.
  const bool fp8 = a.k_cache8 != nullptr;
  if (fp8 && !paged_attention_fp8_supported(s)) return cudaErrorInvalidValue;
  const DecodeKernel decode = decode_kernel_for(s, fp8);
  // The decode kernel's block-table lookups follow the flash kernel's kFlashShiftSlots switch.
  const int bs_shift = detail::block_shift(a.block_size, detail::flash_options(a));
  const dim3 decode_grid(unsigned(a.num_tiles), unsigned(s.kv_heads), unsigned(splits));
  if (decode_only && flash_decode_for(s, a.flash_decode, a.options)) {
    const cudaError_t err = detail::flash_prefill(a, splits, false, stream);
    if (err != cudaSuccess) return err;
  } else if (decode != nullptr && decode_only) {
    decode<<<decode_grid, kDecodeWarps * 32, 0, stream>>>(a, false, bs_shift);
  } else if ((fp8 || a.options.flash) && detail::flash_prefill_supported(s)) {
    const bool mixed = decode != nullptr && a.decode_tiles != 0;
    const cudaError_t err = detail::flash_prefill(a, splits, mixed, stream);
    if (err != cudaSuccess) return err;
    if (mixed) decode<<<decode_grid, kDecodeWarps * 32, 0, stream>>>(a, true, bs_shift);
  } else {
    const dim3 grid(unsigned(a.num_tiles), unsigned(s.kv_heads * plan.head_parts),
                    unsigned(splits));
    paged_attention_kernel<<<grid, kThreads, smem, stream>>>(a, plan);
  }
  if (splits == 1) return cudaGetLastError();
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  merge_splits_kernel<<<unsigned(pairs), std::min(s.head_dim, 128), 0, stream>>>(
      a.workspace, splits, pairs, s.head_dim, a.sinks, s.q_heads, a.out);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
