// The chunked (WY) form of Gated DeltaNet's token mixing for long rows (gated_deltanet_chunked.h):
// prepare, window, wy, state and norm kernels; the math is gated_delta_ref.cpp's
// gated_delta_chunked_ref, the conv, gates and norm gated_deltanet.cu's.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/linear_attention/deltanet_device_math.cuh"
#include "kernels/linear_attention/gated_deltanet_chunk_map.h"
#include "kernels/linear_attention/gated_deltanet_chunked.h"
#include "kernels/linear_attention/mma_fragments.h"
#include "kernels/mma_sync.cuh"

namespace nibble::kernels {
namespace {

constexpr int C = kGatedDeltaChunk;
constexpr int kThreads = 128;  // 4 warps; warp w owns the chunk's tokens 16 w .. 16 w + 15
constexpr int kMaxConvKernel = 8;
constexpr int kSlice = 32;  // value columns a state block keeps (its S slice: k_dim x 32 FP32)

using bf16_bits = std::uint16_t;
using deltanet::bf16_at;
using deltanet::silu;
using deltanet::to_bf16;
using deltanet::warp_sum;

// Two floats as a BF16 pair, the first in the low half (an mma fragment register).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  return std::uint32_t(to_bf16(lo)) | (std::uint32_t(to_bf16(hi)) << 16);
}
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return unsigned(__cvta_generic_to_shared(p));
}

struct Dims {
  int k_heads, v_heads, k_dim, v_dim, conv_kernel, group, key_dim, value_dim, conv_dim, qkvz_width,
      ba_width, min_tokens, num_rows;
};

// The workspace's arrays for T tokens, each 256-byte aligned: q, k [T, k_heads, k_dim] BF16
// (normalised, q scaled by 1 / sqrt(k_dim)); v [T, v_heads, v_dim] BF16 (after the conv),
// overwritten by U; w [T, v_heads, k_dim] BF16; g [T, v_heads] FP32 (the log decay, overwritten by
// its cumulative sum within each chunk); beta [T, v_heads] FP32.
struct Workspace {
  bf16_bits *q, *k, *vu, *w;
  float *g, *beta;
};

struct WorkspaceLayout {
  std::size_t q, k, vu, w, g, beta, bytes;
};

WorkspaceLayout workspace_layout(const GatedDeltaNetShape& s, std::int64_t tokens) {
  const auto T = std::size_t(tokens < 0 ? 0 : tokens);
  auto aligned = [](std::size_t n) { return (n + 255) / 256 * 256; };
  WorkspaceLayout l{};
  std::size_t at = 0;
  auto place = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += aligned(bytes);
    return here;
  };
  l.q = place(T * std::size_t(s.key_dim()) * 2);
  l.k = place(T * std::size_t(s.key_dim()) * 2);
  l.vu = place(T * std::size_t(s.value_dim()) * 2);
  l.w = place(T * std::size_t(s.heads.v_heads) * std::size_t(s.heads.k_dim) * 2);
  l.g = place(T * std::size_t(s.heads.v_heads) * 4);
  l.beta = place(T * std::size_t(s.heads.v_heads) * 4);
  l.bytes = at;
  return l;
}

// 1. One block per (token, key head): the conv over the key head's q, k and v channels (the
// window from the slot for the row's first conv_kernel - 1 tokens, else the row's own inputs), the
// L2 norms and the gates of its value heads, to the workspace.
template <int DK>
__global__ void __launch_bounds__(kThreads)
    prepare_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows,
                   const bf16_bits* __restrict__ qkvz, const bf16_bits* __restrict__ ba,
                   GatedDeltaNetDeviceParams p, const float* __restrict__ conv_state,
                   Workspace ws) {
  extern __shared__ float qkv[];  // [2 DK + group v_dim], then the 2 norms' partial sums
  const std::int64_t t = blockIdx.x;
  const int kh = blockIdx.y, tid = threadIdx.x;
  const int r = chunked_row_of(rows, d.num_rows, d.min_tokens, t);
  if (r < 0) return;
  const GatedDeltaNetRow row = rows[r];
  const int pos = int(t - row.first), K = d.conv_kernel, G = d.group, Dv = d.v_dim;
  const int channels = 2 * DK + G * Dv, per_kh = 2 * DK + 2 * G * Dv;
  const float* const window = conv_state + std::int64_t(row.slot) * (K - 1) * d.conv_dim;
  for (int c = tid; c < channels; c += kThreads) {
    const int ch = c < DK       ? kh * DK + c
                   : c < 2 * DK ? d.key_dim + kh * DK + (c - DK)
                                : 2 * d.key_dim + kh * G * Dv + (c - 2 * DK);
    float acc = 0.0f;
    for (int i = 0; i < K; ++i) {
      const int at = pos - (K - 1) + i;  // the input's position in the row
      const float x = at >= 0 ? bf16_at(qkvz, (std::int64_t(row.first) + at) * d.qkvz_width +
                                                  std::int64_t(kh) * per_kh + c)
                              : window[std::int64_t(at + K - 1) * d.conv_dim + ch];
      acc = fmaf(bf16_at(p.conv_weight, std::int64_t(ch) * K + i), x, acc);
    }
    qkv[c] = silu(acc);
  }
  __syncthreads();
  float* const norms = qkv + channels;
  deltanet::qk_inverse_norms<DK>(qkv, norms, tid);
  if (tid < G) {  // the gates of value head kh G + tid
    const int h = kh * G + tid;
    const bf16_bits* gates = ba + t * d.ba_width + std::int64_t(kh) * 2 * G;
    deltanet::gates_of(bf16_at(gates, G + tid), bf16_at(gates, tid), p.A_log[h], p.dt_bias[h],
                       ws.g[t * d.v_heads + h], ws.beta[t * d.v_heads + h]);
  }
  __syncthreads();
  const float qs = norms[0], ks = norms[1];
  const std::int64_t qk_at = (t * d.k_heads + kh) * DK;
  for (int i = tid; i < DK; i += kThreads) {
    ws.q[qk_at + i] = to_bf16(qkv[i] * qs);
    ws.k[qk_at + i] = to_bf16(qkv[DK + i] * ks);
  }
  const std::int64_t v_at = t * d.value_dim + std::int64_t(kh) * G * Dv;
  for (int i = tid; i < G * Dv; i += kThreads) ws.vu[v_at + i] = to_bf16(qkv[2 * DK + i]);
}

// 2. One thread per (chunked row, conv channel): the window becomes the row's last K - 1 inputs
// (reaching back into the old window for a row shorter than that). Runs after prepare_kernel,
// which read the old window.
__global__ void window_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows,
                              const bf16_bits* __restrict__ qkvz, float* __restrict__ conv_state) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  const GatedDeltaNetRow row = rows[blockIdx.y];
  if (ch >= d.conv_dim || !takes_chunked_form(row, d.min_tokens)) return;
  const int W = d.conv_kernel - 1, G = d.group, Dv = d.v_dim, Dk = d.k_dim;
  // The channel's place in in_proj_qkvz's per-key-head [q | k | v | z] layout.
  int kh, c;
  if (ch < d.key_dim) {
    kh = ch / Dk;
    c = ch % Dk;
  } else if (ch < 2 * d.key_dim) {
    kh = (ch - d.key_dim) / Dk;
    c = Dk + (ch - d.key_dim) % Dk;
  } else {
    kh = (ch - 2 * d.key_dim) / (G * Dv);
    c = 2 * Dk + (ch - 2 * d.key_dim) % (G * Dv);
  }
  float* const window = conv_state + std::int64_t(row.slot) * W * d.conv_dim + ch;
  float next[kMaxConvKernel];
  for (int i = 0; i < W; ++i) {
    const int at = row.count - W + i;  // position in the row
    next[i] = at >= 0 ? bf16_at(qkvz, (std::int64_t(row.first) + at) * d.qkvz_width +
                                          std::int64_t(kh) * (2 * Dk + 2 * G * Dv) + c)
                      : window[std::int64_t(at + W) * d.conv_dim];
  }
  for (int i = 0; i < W; ++i) window[std::int64_t(i) * d.conv_dim] = next[i];
}

// A [rows][cols] BF16 tile of the workspace (row stride `ld` elements) to shared memory (row
// stride `sld`), rows >= valid zero-filled; cols a multiple of 8.
__device__ __forceinline__ void load_tile(bf16_bits* dst, int sld, const bf16_bits* src,
                                          std::int64_t ld, int rows, int cols, int valid) {
  const int pieces = cols / 8;
  for (int e = threadIdx.x; e < rows * pieces; e += kThreads) {
    const int r = e / pieces, c = (e % pieces) * 8;
    const bool in = r < valid;
    cp_async16_to(smem_address(dst + r * sld + c), in ? src + r * ld + c : src, in ? 16u : 0u);
  }
}

// ldmatrix addresses for a 16x16 tile at (r0, c0) of a row-major shared array, by how the
// operand is stored (mma_fragments.h): a_rows an A operand [m][k]; at_km an A operand [k][m]
// (transposed load); b_nk a B operand [n][k]; b_kn a B operand [k][n] (transposed load).
__device__ __forceinline__ const bf16_bits* at(const bf16_bits* s, int ld, int r0, int c0,
                                               TileOffset o) {
  return s + (r0 + o.row) * ld + c0 + o.col;
}
__device__ __forceinline__ const bf16_bits* a_rows(const bf16_bits* s, int ld, int m0, int k0) {
  return at(s, ld, m0, k0, ldsm_a_mk(threadIdx.x % 32));
}
__device__ __forceinline__ const bf16_bits* at_km(const bf16_bits* s, int ld, int k0, int m0) {
  return at(s, ld, k0, m0, ldsm_a_km(threadIdx.x % 32));
}
__device__ __forceinline__ const bf16_bits* b_nk(const bf16_bits* s, int ld, int n0, int k0) {
  return at(s, ld, n0, k0, ldsm_b_nk(threadIdx.x % 32));
}
__device__ __forceinline__ const bf16_bits* b_kn(const bf16_bits* s, int ld, int k0, int n0) {
  return at(s, ld, k0, n0, ldsm_b_kn(threadIdx.x % 32));
}
__device__ __forceinline__ void ldsm(std::uint32_t (&r)[4], const bf16_bits* p) {
  ldmatrix_x4_at(r, smem_address(p));
}
__device__ __forceinline__ void ldsm_t(std::uint32_t (&r)[4], const bf16_bits* p) {
  ldmatrix_x4_trans_at(r, smem_address(p));
}

// Shared-memory row strides (elements): 8 BF16 of padding puts the 8 rows an ldmatrix reads in 8
// different 16-byte bank groups.
template <int DIM>
constexpr int padded = DIM + 8;

// 3. One block per (chunk, value head): G, (I + A)^-1, W and U (see the header).
template <int DK, int DV>
struct WySmem {
  bf16_bits k[C * padded<DK>], v[C * padded<DV>];
  bf16_bits tw[C * padded<C>], tu[C * padded<C>];  // T diag(beta e^G), T diag(beta)
  float a[C][C + 1], t[C][C + 1];                  // A; T = (I + A)^-1, FP32
  float G[C], beta[C];
};

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads)
    wy_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows, Workspace ws) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  auto& s = *reinterpret_cast<WySmem<DK, DV>*>(smem_bytes);
  int r = 0, chunk = 0;
  if (!chunk_of_block(rows, d.num_rows, d.min_tokens, int(blockIdx.x), r, chunk)) return;
  const int h = blockIdx.y, kh = h / d.group, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const GatedDeltaNetRow row = rows[r];
  const std::int64_t start = std::int64_t(row.first) + std::int64_t(chunk) * C;
  const int n = min(C, row.count - chunk * C);
  load_tile(s.k, padded<DK>, ws.k + (start * d.k_heads + kh) * DK, std::int64_t(d.k_heads) * DK, C,
            DK, n);
  load_tile(s.v, padded<DV>, ws.vu + (start * d.v_heads + h) * DV, std::int64_t(d.v_heads) * DV, C,
            DV, n);
  cp_async_commit();
  if (warp == 0) {  // G: the running sum of g over the chunk (padding: g 0, beta 0)
    const std::int64_t at0 = (start + lane) * d.v_heads + h, at1 = at0 + 32 * d.v_heads;
    float g0 = lane < n ? ws.g[at0] : 0.0f, g1 = lane + 32 < n ? ws.g[at1] : 0.0f;
    s.beta[lane] = lane < n ? ws.beta[at0] : 0.0f;
    s.beta[lane + 32] = lane + 32 < n ? ws.beta[at1] : 0.0f;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const float x0 = __shfl_up_sync(0xFFFFFFFFu, g0, o), x1 = __shfl_up_sync(0xFFFFFFFFu, g1, o);
      if (lane >= o) {
        g0 += x0;
        g1 += x1;
      }
    }
    g1 += __shfl_sync(0xFFFFFFFFu, g0, 31);
    s.G[lane] = g0;
    s.G[lane + 32] = g1;
    if (lane < n) ws.g[at0] = g0;
    if (lane + 32 < n) ws.g[at1] = g1;
  }
  cp_async_wait<0>();
  __syncthreads();
  const int g = lane / 4, q4 = lane % 4;
  // A = strictly lower beta_i e^(G_i - G_j) k_i.k_j: warp's rows i, all 64 columns j.
  {
    float acc[C / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk) {
      std::uint32_t a[4];
      ldsm(a, a_rows(s.k, padded<DK>, 16 * warp, 16 * kk));
#pragma unroll
      for (int jp = 0; jp < C / 16; ++jp) {
        if (jp > warp) continue;  // j > i: zero
        std::uint32_t b[4];
        ldsm(b, b_nk(s.k, padded<DK>, 16 * jp, 16 * kk));
        mma_bf16(acc[2 * jp], a, b[0], b[1]);
        mma_bf16(acc[2 * jp + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < C / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * warp + g + (e / 2) * 8, j = 8 * nt + 2 * q4 + e % 2;
        s.a[i][j] = j < i ? s.beta[i] * expf(s.G[i] - s.G[j]) * acc[nt][e] : 0.0f;
      }
  }
  __syncthreads();
  // T = (I + A)^-1 by forward substitution, one column a thread: T[i][c] = -sum_j A[i][j] T[j][c]
  // for i > c (T[j][c] = 0 for j < c), T[c][c] = 1. FP32: W and U inherit its error.
  if (tid < C) {
    const int c = tid;
    for (int i = 0; i < C; ++i) s.t[i][c] = i == c ? 1.0f : 0.0f;
    for (int i = 1; i < C; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < i; ++j) sum = fmaf(s.a[i][j], s.t[j][c], sum);
      if (i > c) s.t[i][c] = -sum;
    }
  }
  __syncthreads();
  for (int e = tid; e < C * C; e += kThreads) {
    const int i = e / C, j = e % C;
    const float tij = s.t[i][j] * s.beta[j];
    s.tu[i * padded<C> + j] = to_bf16(tij);
    s.tw[i * padded<C> + j] = to_bf16(tij * expf(s.G[j]));
  }
  __syncthreads();
  // W = Tw K [64 x DK] and U = Tu V [64 x DV]: the warp's 16 rows, j up to them.
  auto product = [&](const bf16_bits* tri, const bf16_bits* x, int ldx, auto cols_tag,
                     bf16_bits* dst, std::int64_t ld_dst) {
    constexpr int COLS = decltype(cols_tag)::value;
    float acc[COLS / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < C / 16; ++kk) {
      if (kk > warp) continue;
      std::uint32_t a[4];
      ldsm(a, a_rows(tri, padded<C>, 16 * warp, 16 * kk));
#pragma unroll
      for (int np = 0; np < COLS / 16; ++np) {
        std::uint32_t b[4];
        ldsm_t(b, b_kn(x, ldx, 16 * kk, 16 * np));
        mma_bf16(acc[2 * np], a, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < COLS / 8; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = 16 * warp + g + half * 8;
        if (i < n)
          *reinterpret_cast<std::uint32_t*>(dst + i * ld_dst + 8 * nt + 2 * q4) =
              pack_bf16(acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
  };
  product(s.tw, s.k, padded<DK>, std::integral_constant<int, DK>{},
          ws.w + (start * d.v_heads + h) * DK, std::int64_t(d.v_heads) * DK);
  product(s.tu, s.v, padded<DV>, std::integral_constant<int, DV>{},
          ws.vu + (start * d.v_heads + h) * DV, std::int64_t(d.v_heads) * DV);
}

// 4. One block per (32 value columns, value head, chunked row): the chunks in order, the state
// slice S [DK x 32] in FP32 accumulators (warp w: k rows DK/4 w ..), its BF16 copy in shared
// memory as the B operand of W S and Q S.
template <int DK>
struct StateSmem {
  bf16_bits q[C * padded<DK>], k[C * padded<DK>], w[C * padded<DK>];
  bf16_bits u[C * padded<kSlice>], up[C * padded<kSlice>], ud[C * padded<kSlice>];
  bf16_bits s[DK * padded<kSlice>];
  float G[C];
};

template <int DK>
__global__ void __launch_bounds__(kThreads)
    state_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows, Workspace ws,
                 float* __restrict__ recurrent, bf16_bits* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  auto& s = *reinterpret_cast<StateSmem<DK>*>(smem_bytes);
  const GatedDeltaNetRow row = rows[blockIdx.z];
  if (!takes_chunked_form(row, d.min_tokens)) return;
  const int col0 = blockIdx.x * kSlice, h = blockIdx.y, kh = h / d.group, Dv = d.v_dim;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q4 = lane % 4;
  constexpr int MT = DK / 64;  // the warp's 16-row tiles of S
  constexpr int SLD = padded<kSlice>;
  float* const S = recurrent + (std::int64_t(row.slot) * d.v_heads + h) * DK * Dv + col0;
  float acc_s[MT][kSlice / 8][4];
  auto s_row = [&](int mt, int e) { return (DK / 4) * warp + 16 * mt + g + (e / 2) * 8; };
  auto s_col = [&](int nt, int e) { return 8 * nt + 2 * q4 + e % 2; };
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc_s[mt][nt][e] = S[std::int64_t(s_row(mt, e)) * Dv + s_col(nt, e)];
        s.s[s_row(mt, e) * SLD + s_col(nt, e)] = to_bf16(acc_s[mt][nt][e]);
      }
  const int chunks = (row.count + C - 1) / C;
  // A chunk's tiles (rows past its end zero-filled). The next chunk's W and U are fetched once
  // this one's U' is made, its Q once its outputs are, its K once its state update is: each load
  // overlaps the phases after its tile's last use.
  const std::int64_t qk_ld = std::int64_t(d.k_heads) * DK, w_ld = std::int64_t(d.v_heads) * DK;
  auto chunk_start = [&](int c) { return std::int64_t(row.first) + std::int64_t(c) * C; };
  auto chunk_tokens = [&](int c) { return min(C, row.count - c * C); };
  auto load_w_u = [&](int c) {
    const std::int64_t at = chunk_start(c) * d.v_heads + h;
    load_tile(s.w, padded<DK>, ws.w + at * DK, w_ld, C, DK, chunk_tokens(c));
    load_tile(s.u, SLD, ws.vu + at * Dv + col0, std::int64_t(d.v_heads) * Dv, C, kSlice,
              chunk_tokens(c));
    cp_async_commit();
  };
  auto load_qk = [&](bf16_bits* dst, const bf16_bits* src, int c) {
    load_tile(dst, padded<DK>, src + (chunk_start(c) * d.k_heads + kh) * DK, qk_ld, C, DK,
              chunk_tokens(c));
    cp_async_commit();
  };
  load_w_u(0);
  load_qk(s.q, ws.q, 0);
  load_qk(s.k, ws.k, 0);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t start = chunk_start(chunk);
    const int n = chunk_tokens(chunk);
    const bool next = chunk + 1 < chunks;
    if (tid < C) s.G[tid] = ws.g[(start + min(tid, n - 1)) * d.v_heads + h];  // padding: G_last
    cp_async_wait<0>();
    __syncthreads();
    const float G_last = s.G[C - 1];
    // U' = U - W S and exp(G) Q S over the warp's 16 tokens.
    float o[kSlice / 8][4] = {};
    {
      float ws_acc[kSlice / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        std::uint32_t aw[4], aq[4];
        ldsm(aw, a_rows(s.w, padded<DK>, 16 * warp, 16 * kk));
        ldsm(aq, a_rows(s.q, padded<DK>, 16 * warp, 16 * kk));
#pragma unroll
        for (int np = 0; np < kSlice / 16; ++np) {
          std::uint32_t b[4];
          ldsm_t(b, b_kn(s.s, SLD, 16 * kk, 16 * np));
          mma_bf16(ws_acc[2 * np], aw, b[0], b[1]);
          mma_bf16(ws_acc[2 * np + 1], aw, b[2], b[3]);
          mma_bf16(o[2 * np], aq, b[0], b[1]);
          mma_bf16(o[2 * np + 1], aq, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = 16 * warp + g + (e / 2) * 8, c = s_col(nt, e);
          const float u = __bfloat162float(__ushort_as_bfloat16(s.u[i * SLD + c])) - ws_acc[nt][e];
          s.up[i * SLD + c] = to_bf16(u);
          s.ud[i * SLD + c] = to_bf16(expf(G_last - s.G[i]) * u);
          o[nt][e] *= expf(s.G[i]);
        }
    }
    __syncthreads();  // every warp is done with W and U
    if (next) load_w_u(chunk + 1);
    // O += P U' with P = causal e^(G_i - G_j) q_i.k_j (its C fragments reused as A fragments).
    {
      float p[C / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        std::uint32_t aq[4];
        ldsm(aq, a_rows(s.q, padded<DK>, 16 * warp, 16 * kk));
#pragma unroll
        for (int jp = 0; jp < C / 16; ++jp) {
          if (jp > warp) continue;
          std::uint32_t b[4];
          ldsm(b, b_nk(s.k, padded<DK>, 16 * jp, 16 * kk));
          mma_bf16(p[2 * jp], aq, b[0], b[1]);
          mma_bf16(p[2 * jp + 1], aq, b[2], b[3]);
        }
      }
#pragma unroll
      for (int jt = 0; jt < C / 8; ++jt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = 16 * warp + g + (e / 2) * 8, j = 8 * jt + 2 * q4 + e % 2;
          p[jt][e] = j <= i ? expf(s.G[i] - s.G[j]) * p[jt][e] : 0.0f;
        }
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk) {
        if (kk > warp) continue;
        const std::uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                                    pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                                    pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                                    pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < kSlice / 16; ++np) {
          std::uint32_t b[4];
          ldsm_t(b, b_kn(s.up, SLD, 16 * kk, 16 * np));
          mma_bf16(o[2 * np], a, b[0], b[1]);
          mma_bf16(o[2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = 16 * warp + g + half * 8;
          if (i < n)
            *reinterpret_cast<std::uint32_t*>(out + (start + i) * d.value_dim +
                                              std::int64_t(h) * Dv + col0 + 8 * nt + 2 * q4) =
                pack_bf16(o[nt][2 * half], o[nt][2 * half + 1]);
        }
    }
    __syncthreads();  // every warp is done with Q
    if (next) load_qk(s.q, ws.q, chunk + 1);
    // S <- e^G_last S + K^T Ud over the warp's k rows.
    const float decay = expf(G_last);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] *= decay;
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk) {
        std::uint32_t a[4];
        ldsm_t(a, at_km(s.k, padded<DK>, 16 * kk, (DK / 4) * warp + 16 * mt));
#pragma unroll
        for (int np = 0; np < kSlice / 16; ++np) {
          std::uint32_t b[4];
          ldsm_t(b, b_kn(s.ud, SLD, 16 * kk, 16 * np));
          mma_bf16(acc_s[mt][2 * np], a, b[0], b[1]);
          mma_bf16(acc_s[mt][2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s.s[s_row(mt, e) * SLD + s_col(nt, e)] = to_bf16(acc_s[mt][nt][e]);
    }
    __syncthreads();  // every warp is done with K; s is the new state
    if (next) load_qk(s.k, ws.k, chunk + 1);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kSlice / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        S[std::int64_t(s_row(mt, e)) * Dv + s_col(nt, e)] = acc_s[mt][nt][e];
}

// 5. One block per token of a chunked row, a warp per value head: the gated RMSNorm of the delta
// rule's output (in `out`) with z, in place.
__global__ void __launch_bounds__(kThreads)
    norm_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows,
                const bf16_bits* __restrict__ qkvz, const float* __restrict__ norm_weight,
                float eps, bf16_bits* __restrict__ out) {
  const std::int64_t t = blockIdx.x;
  if (chunked_row_of(rows, d.num_rows, d.min_tokens, t) < 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, G = d.group, Dv = d.v_dim;
  constexpr int kMaxPerLane = 4;  // v_dim <= 128
  for (int h = warp; h < d.v_heads; h += kThreads / 32) {
    const int kh = h / G, hh = h % G;
    bf16_bits* const o = out + t * d.value_dim + std::int64_t(h) * Dv;
    const bf16_bits* const z = qkvz + t * d.qkvz_width +
                               std::int64_t(kh) * (2 * d.k_dim + 2 * G * Dv) + 2 * d.k_dim +
                               G * Dv + hh * Dv;
    float x[kMaxPerLane];
    float squares = 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int j = lane + 32 * e;
      x[e] = j < Dv ? bf16_at(o, j) : 0.0f;
      squares = fmaf(x[e], x[e], squares);
    }
    const float scale = rsqrtf(warp_sum(squares) / float(Dv) + eps);
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int j = lane + 32 * e;
      if (j < Dv) o[j] = to_bf16(norm_weight[j] * (x[e] * scale) * silu(bf16_at(z, j)));
    }
  }
}

template <int DK, int DV>
cudaError_t launch(const Dims& d, std::int64_t tokens, const GatedDeltaNetRow* rows,
                   const bf16_bits* qkvz, const bf16_bits* ba,
                   const GatedDeltaNetDeviceParams& params, const GatedDeltaNetDeviceState& state,
                   const Workspace& ws, bf16_bits* out, cudaStream_t stream) {
  const std::size_t wy_smem = sizeof(WySmem<DK, DV>), state_smem = sizeof(StateSmem<DK>);
  // Once per kernel (as the W4A16 kernels do), so that a captured step makes no such call, and
  // before anything is launched: the opt-in to more than 48 KB of shared memory.
  static const cudaError_t attribute_err = [&] {
    const cudaError_t err = cudaFuncSetAttribute(
        wy_kernel<DK, DV>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(wy_smem));
    return err != cudaSuccess
               ? err
               : cudaFuncSetAttribute(state_kernel<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(state_smem));
  }();
  if (attribute_err != cudaSuccess) return attribute_err;
  const unsigned T = unsigned(tokens);
  const std::size_t prep_smem = sizeof(float) * std::size_t(2 * DK + d.group * DV + 2);
  prepare_kernel<DK><<<dim3(T, unsigned(d.k_heads)), kThreads, prep_smem, stream>>>(
      d, rows, qkvz, ba, params, state.conv, ws);
  window_kernel<<<dim3(unsigned((d.conv_dim + 127) / 128), unsigned(d.num_rows)), 128, 0, stream>>>(
      d, rows, qkvz, state.conv);
  const auto chunk_blocks = unsigned(chunk_grid_blocks(tokens, d.num_rows));
  wy_kernel<DK, DV>
      <<<dim3(chunk_blocks, unsigned(d.v_heads)), kThreads, wy_smem, stream>>>(d, rows, ws);
  state_kernel<DK><<<dim3(unsigned(DV / kSlice), unsigned(d.v_heads), unsigned(d.num_rows)),
                     kThreads, state_smem, stream>>>(d, rows, ws, state.recurrent, out);
  norm_kernel<<<T, kThreads, 0, stream>>>(d, rows, qkvz, params.norm_weight, params.eps, out);
  return cudaGetLastError();
}

}  // namespace

bool gated_deltanet_chunked_supported(const GatedDeltaNetShape& s) {
  const GatedDeltaShape& h = s.heads;
  return h.k_heads >= 1 && h.v_heads % h.k_heads == 0 && (h.k_dim == 64 || h.k_dim == 128) &&
         (h.v_dim == 64 || h.v_dim == 128) && s.conv_kernel >= 2 &&
         s.conv_kernel <= kMaxConvKernel && s.group() * h.v_dim >= 64 && s.group() * h.v_dim <= 256;
}

std::size_t gated_deltanet_chunked_workspace_bytes(const GatedDeltaNetShape& shape,
                                                   std::int64_t tokens) {
  return gated_deltanet_chunked_supported(shape) ? workspace_layout(shape, tokens).bytes : 0;
}

cudaError_t gated_deltanet_mix_chunked(
    const GatedDeltaNetShape& shape, const GatedDeltaNetRow* rows, int num_rows,
    std::int64_t tokens, int min_tokens, const std::uint16_t* qkvz, const std::uint16_t* ba,
    const GatedDeltaNetDeviceParams& params, const GatedDeltaNetDeviceState& state,
    const GatedDeltaNetWorkspace& workspace, std::uint16_t* out, cudaStream_t stream) {
  const WorkspaceLayout l = workspace_layout(shape, tokens);
  if (!gated_deltanet_chunked_supported(shape) || num_rows < 0 || num_rows > 65535 || tokens < 0 ||
      tokens > INT_MAX || min_tokens < 1 ||
      (num_rows > 0 && tokens > 0 &&
       (rows == nullptr || qkvz == nullptr || ba == nullptr || out == nullptr ||
        state.conv == nullptr || state.recurrent == nullptr || params.conv_weight == nullptr ||
        params.A_log == nullptr || params.dt_bias == nullptr || params.norm_weight == nullptr ||
        workspace.ptr == nullptr || workspace.bytes < l.bytes)))
    return cudaErrorInvalidValue;
  if (num_rows == 0 || tokens == 0) return cudaSuccess;
  const GatedDeltaShape& h = shape.heads;
  const Dims d{h.k_heads,         h.v_heads,          h.k_dim,          h.v_dim,
               shape.conv_kernel, shape.group(),      shape.key_dim(),  shape.value_dim(),
               shape.conv_dim(),  shape.qkvz_width(), shape.ba_width(), min_tokens,
               num_rows};
  auto* base = static_cast<unsigned char*>(workspace.ptr);
  const Workspace ws{
      reinterpret_cast<bf16_bits*>(base + l.q),  reinterpret_cast<bf16_bits*>(base + l.k),
      reinterpret_cast<bf16_bits*>(base + l.vu), reinterpret_cast<bf16_bits*>(base + l.w),
      reinterpret_cast<float*>(base + l.g),      reinterpret_cast<float*>(base + l.beta)};
  if (h.k_dim == 128 && h.v_dim == 128)
    return launch<128, 128>(d, tokens, rows, qkvz, ba, params, state, ws, out, stream);
  if (h.k_dim == 128)
    return launch<128, 64>(d, tokens, rows, qkvz, ba, params, state, ws, out, stream);
  if (h.v_dim == 128)
    return launch<64, 128>(d, tokens, rows, qkvz, ba, params, state, ws, out, stream);
  return launch<64, 64>(d, tokens, rows, qkvz, ba, params, state, ws, out, stream);
}

}  // namespace nibble::kernels
