#include <cuda_bf16.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/attention/flash_prefill.h"
#include "kernels/dependent_launch.cuh"

namespace nibble::kernels::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Per head_dim: MT m16 tiles of query rows per warp (two halve the shared-memory reads of every K
// and V fragment, which bound the one-tile form: ~290 bytes of ldmatrix per mma against the
// ~190 an SM's shared memory feeds in an mma's time) and KC keys per staged chunk, within the
// registers (MT x (D/8 + KC/8) x 4 accumulators per lane) and GB10's ~99 KB per block.
template <int D>
struct Config {
  static constexpr int MT = D <= 128 ? 2 : 1;
  static constexpr int KC = D <= 64 ? 64 : 32;
  static constexpr int kRows = kWarps * 16 * MT;  // query rows per block
  static constexpr std::size_t kSmem = std::size_t(kRows + 4 * KC) * D * 2;
};

int rows_per_block(int head_dim) {
  switch (head_dim) {
    case 64:
      return Config<64>::kRows;
    case 128:
      return Config<128>::kRows;
    default:
      return Config<256>::kRows;
  }
}

// Rows of D BF16 values in shared memory as D/8 16-byte chunks; chunk c of row r is stored at
// c ^ (r % 8), so the eight rows an ldmatrix phase reads at one logical chunk hit eight distinct
// bank groups (D >= 64: at least 8 chunks per row).
template <int D>
__device__ __forceinline__ unsigned swizzled(unsigned base, int row, int chunk) {
  return base + unsigned((row * (D / 8) + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool live) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(live ? 16 : 0));  // 0: zero-fill
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

// c += a . b on a 16x8x16 BF16 tile, FP32 accumulators.
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                    std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Starts copying the keys and values [c0, c0 + KC) of KV head kvh into the chunk buffers; keys
// past `last` are zero-filled (their scores are masked, their zero values add nothing).
template <int D, int KC>
__device__ __forceinline__ void load_chunk(const PagedAttentionArgs& a, const std::int32_t* table,
                                           int kvh, int c0, int last, unsigned k_s, unsigned v_s) {
  constexpr int kVecs = D / 8;
  for (int e = threadIdx.x; e < KC * kVecs; e += kThreads) {
    const int j = e / kVecs, c = e % kVecs, key = c0 + j;
    const bool live = key <= last;
    std::int64_t at = 0;
    if (live) {
      const std::int64_t slot =
          std::int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
      at = (slot * a.shape.kv_heads + kvh) * D + c * 8;
    }
    cp_async16(swizzled<D>(k_s, j, c), a.k_cache + at, live);
    cp_async16(swizzled<D>(v_s, j, c), a.v_cache + at, live);
  }
}

// grid: (tiles, kv heads, splits). Query row r of the block is position r / G of the tile and
// query head kvh * G + r % G; warp w owns rows [16 MT w, 16 MT (w + 1)).
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_prefill_kernel(PagedAttentionArgs a, bool skip_single_rows) {
  kernels::allow_next_grid();  // the o projection may start fetching its weights
  using C = Config<D>;
  constexpr int MT = C::MT, KC = C::KC, kVecs = D / 8;
  // Later tiles of a sequence see more keys: run them first.
  const AttentionTile tile = a.tiles[a.num_tiles - 1 - int(blockIdx.x)];
  if (skip_single_rows && tile.rows == 1) return;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned q_s = unsigned(__cvta_generic_to_shared(smem));
  const unsigned kv_s = q_s + C::kRows * D * 2;  // [2 buffers][K, V][KC][D]
  constexpr unsigned kTensorBytes = KC * D * 2;
  const int G = a.shape.q_heads / a.shape.kv_heads, used_rows = (C::kRows / G) * G;
  const int kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int last = tile.position0 + tile.rows - 1;
  const std::int32_t* table = a.block_tables + tile.table_offset;
  const int splits = gridDim.z, chunks = last / KC + 1, per = (chunks + splits - 1) / splits;
  const int c_begin = int(blockIdx.z) * per * KC,
            c_end = min(chunks, int(blockIdx.z + 1) * per) * KC;

  auto q_row = [&](int r) {  // row of q / out for query row r (valid rows only)
    return (std::int64_t(tile.row0 + r / G) * a.shape.q_heads + kvh * G + r % G) * D;
  };
  auto valid = [&](int r) { return r < used_rows && r / G < tile.rows; };
  for (int e = threadIdx.x; e < C::kRows * kVecs; e += kThreads) {
    const int r = e / kVecs, c = e % kVecs;
    const bool live = valid(r);
    cp_async16(swizzled<D>(q_s, r, c), a.q + (live ? q_row(r) + c * 8 : 0), live);
  }
  if (c_begin < c_end) load_chunk<D, KC>(a, table, kvh, c_begin, last, kv_s, kv_s + kTensorBytes);
  asm volatile("cp.async.commit_group;\n" ::);

  // This lane's rows of every accumulator fragment: in m tile t, rows[t][0] = lane / 4 and
  // rows[t][1] = lane / 4 + 8. Rows that do not exist take the tile's last position (finite
  // scores; never written out).
  const int row0 = warp * 16 * MT;
  int rows[MT][2], pos[MT][2];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rows[t][h] = row0 + 16 * t + lane / 4 + 8 * h;
      pos[t][h] = valid(rows[t][h]) ? tile.position0 + rows[t][h] / G : last;
    }
  const float scale_log2 = a.scale * 1.4426950408889634f;
  float o[MT][D / 8][4], m[MT][2], l[MT][2];
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    m[t][0] = m[t][1] = -INFINITY;
    l[t][0] = l[t][1] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[t][i][0] = o[t][i][1] = o[t][i][2] = o[t][i][3] = 0.0f;
  }

  for (int c0 = c_begin, buf = 0; c0 < c_end; c0 += KC, buf ^= 1) {
    const unsigned k_s = kv_s + unsigned(buf) * 2 * kTensorBytes, v_s = k_s + kTensorBytes;
    if (c0 + KC < c_end) {  // the next chunk into the other buffer, then wait for this one
      const unsigned next = kv_s + unsigned(buf ^ 1) * 2 * kTensorBytes;
      load_chunk<D, KC>(a, table, kvh, c0 + KC, last, next, next + kTensorBytes);
      asm volatile("cp.async.commit_group;\n" ::);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();

    // S = Q . K^T for this warp's rows and the chunk's KC keys; each K fragment feeds MT tiles.
    float s[MT][KC / 8][4];
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int i = 0; i < KC / 8; ++i) s[t][i][0] = s[t][i][1] = s[t][i][2] = s[t][i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      std::uint32_t qa[MT][4];
#pragma unroll
      for (int t = 0; t < MT; ++t)
        ldmatrix_x4(qa[t], swizzled<D>(q_s, row0 + 16 * t + lane % 8 + 8 * ((lane / 8) % 2),
                                       2 * ks + lane / 16));
#pragma unroll
      for (int np = 0; np < KC / 16; ++np) {
        std::uint32_t kb[4];
        ldmatrix_x4(
            kb, swizzled<D>(k_s, np * 16 + lane % 8 + 8 * (lane / 16), 2 * ks + (lane / 8) % 2));
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          mma(s[t][2 * np], qa[t], kb[0], kb[1]);
          mma(s[t][2 * np + 1], qa[t], kb[2], kb[3]);
        }
      }
    }

    // Scale into the exp2 domain, mask keys past each row's position (only chunks that reach
    // the tile's first position have any), online softmax.
    const bool diagonal = c0 + KC - 1 > tile.position0;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < KC / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = c0 + nt * 8 + 2 * (lane % 4) + (e & 1);
          float v = s[t][nt][e] * scale_log2;
          if (diagonal && key > pos[t][e / 2]) v = -INFINITY;
          s[t][nt][e] = v;
          mx[e / 2] = fmaxf(mx[e / 2], v);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float next = fmaxf(m[t][h], quad_max(mx[h]));
        // A row may see no key yet in this block's share of a split: keep exponents finite.
        const float base = next == -INFINITY ? 0.0f : next;
        const float alpha = fast_exp2(m[t][h] - base);
        m[t][h] = next;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < KC / 8; ++nt) {
          s[t][nt][2 * h] = fast_exp2(s[t][nt][2 * h] - base);
          s[t][nt][2 * h + 1] = fast_exp2(s[t][nt][2 * h + 1] - base);
          sum += s[t][nt][2 * h] + s[t][nt][2 * h + 1];
        }
        l[t][h] = l[t][h] * alpha + sum;  // this lane's share of the row sum
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          o[t][dt][2 * h] *= alpha;
          o[t][dt][2 * h + 1] *= alpha;
        }
      }
    }

    // O += P . V: the score fragments of keys [16kk, 16kk + 16) are the A operand as they lie;
    // each V fragment feeds MT tiles.
#pragma unroll
    for (int kk = 0; kk < KC / 16; ++kk) {
      std::uint32_t pa[MT][4];
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        pa[t][0] = pack_bf16(s[t][2 * kk][0], s[t][2 * kk][1]);
        pa[t][1] = pack_bf16(s[t][2 * kk][2], s[t][2 * kk][3]);
        pa[t][2] = pack_bf16(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
        pa[t][3] = pack_bf16(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t vb[4];
        ldmatrix_x4_trans(
            vb, swizzled<D>(v_s, kk * 16 + lane % 8 + 8 * ((lane / 8) % 2), 2 * dp + lane / 16));
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          mma(o[t][2 * dp], pa[t], vb[0], vb[1]);
          mma(o[t][2 * dp + 1], pa[t], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // buffer `buf` is free for the chunk after next
  }
  asm volatile("cp.async.wait_group 0;\n" ::);  // a block with no chunk still staged q

  const int col = 2 * (lane % 4);
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(l[t][h]);
      const int r = rows[t][h];
      if (!valid(r)) continue;
      if (splits == 1) {
        const float inv = 1.0f / sum;
        auto* out = reinterpret_cast<std::uint32_t*>(a.out + q_row(r) + col);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          out[dt * 4] = pack_bf16(o[t][dt][2 * h] * inv, o[t][dt][2 * h + 1] * inv);
        continue;
      }
      // Partial results for merge_splits: [split][row, head][D unnormalised sums, max, sum],
      // the max in natural-log units of the scaled score.
      float* part = a.workspace +
                    (std::int64_t(blockIdx.z) * a.rows * a.shape.q_heads + q_row(r) / D) * (D + 2);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        part[dt * 8 + col] = o[t][dt][2 * h];
        part[dt * 8 + col + 1] = o[t][dt][2 * h + 1];
      }
      if (lane % 4 == 0) {
        part[D] = m[t][h] == -INFINITY ? -INFINITY : m[t][h] * 0.6931471805599453f;
        part[D + 1] = sum;
      }
    }
}

template <int D>
cudaError_t launch(const PagedAttentionArgs& a, int splits, bool skip_single_rows,
                   cudaStream_t stream) {
  constexpr std::size_t smem = Config<D>::kSmem;
  // Above 48 KB the kernel must opt in; once, not on every layer of every step.
  static std::atomic<bool> opted_in{false};
  if (!opted_in.load(std::memory_order_relaxed)) {
    const cudaError_t err = cudaFuncSetAttribute(
        flash_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
    opted_in.store(true, std::memory_order_relaxed);
  }
  const dim3 grid(unsigned(a.num_tiles), unsigned(a.shape.kv_heads), unsigned(splits));
  flash_prefill_kernel<D><<<grid, kThreads, smem, stream>>>(a, skip_single_rows);
  return cudaGetLastError();
}

}  // namespace

bool flash_prefill_supported(const AttentionShape& s) {
  if (s.kv_heads <= 0 || s.q_heads % s.kv_heads != 0) return false;
  const int group = s.q_heads / s.kv_heads;
  return (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) &&
         group <= rows_per_block(s.head_dim);
}

int flash_prefill_rows_per_tile(const AttentionShape& s) {
  return rows_per_block(s.head_dim) / (s.q_heads / s.kv_heads);
}

cudaError_t flash_prefill(const PagedAttentionArgs& a, int splits, bool skip_single_rows,
                          cudaStream_t stream) {
  switch (a.shape.head_dim) {
    case 64:
      return launch<64>(a, splits, skip_single_rows, stream);
    case 128:
      return launch<128>(a, splits, skip_single_rows, stream);
    case 256:
      return launch<256>(a, splits, skip_single_rows, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace nibble::kernels::detail
