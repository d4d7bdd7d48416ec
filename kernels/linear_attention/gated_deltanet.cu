// Gated DeltaNet's token mixing on the device (gated_deltanet.h): per row (a sequence's chunk of
// tokens), its tokens in order through the conv window update, the gates, the L2 norms, the delta
// rule on a register-held state column and the gated RMSNorm; one launch for a step's prefill
// chunks and decode rows together.
#include <cuda_bf16.h>

#include "kernels/linear_attention/deltanet_device_math.cuh"
#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/linear_attention/gated_deltanet_chunk_map.h"

namespace nibble::kernels {
namespace {

constexpr int kMaxConvKernel = 8;
// Threads a block: a thread holds a k_dim-float state column in registers (128 at k_dim 128), so
// the block stays at 256 threads (Qwen3-Next: 2 value heads of 128 per key head).
constexpr int kMaxThreads = 256;

using deltanet::bf16_at;
using deltanet::silu;
using deltanet::warp_sum;

struct Dims {
  int k_heads, v_heads, v_dim, conv_kernel, group, key_dim, value_dim, conv_dim, qkvz_width,
      ba_width;
};

// Block (key head blockIdx.x, row blockIdx.y); threads group * v_dim. Thread (hh, j) keeps column
// j of value head hh's state in registers over the row's tokens: read once, written once.
// kSnapshots: the launch may hold verify rows (GatedDeltaNetDeviceState::max_snapshots > 0); the
// form without them is the one decode and prompt steps run, no register spent on snapshots.
template <int DK, bool kSnapshots>
__global__ void __launch_bounds__(kMaxThreads)
    gated_deltanet_kernel(Dims d, const GatedDeltaNetRow* __restrict__ rows,
                          const std::uint16_t* __restrict__ qkvz,
                          const std::uint16_t* __restrict__ ba, GatedDeltaNetDeviceParams p,
                          GatedDeltaNetDeviceState st, std::uint16_t* __restrict__ out,
                          int skip_from) {
  extern __shared__ float shared[];
  const int kh = blockIdx.x, tid = threadIdx.x;
  const GatedDeltaNetRow row = rows[blockIdx.y];
  if (takes_chunked_form(row, skip_from)) return;  // the chunked form's row
  const int G = d.group, Dv = d.v_dim, K = d.conv_kernel;
  const int channels = 2 * DK + G * Dv;  // this block's: q, k, then its value heads' v
  float* const qkv = shared;             // [channels] after the conv
  float* const gate_g = qkv + channels;  // [G]
  float* const gate_beta = gate_g + G;   // [G]
  float* const norms = gate_beta + G;    // [2]: q's and k's scales
  float* const head_sums = norms + 2;    // [blockDim / 32]
  const std::int64_t slot = row.slot;
  float* const conv = st.conv + slot * std::int64_t(K - 1) * d.conv_dim;
  const int hh = tid / Dv, j = tid % Dv, h = kh * G + hh;
  float* const S = st.recurrent + ((slot * d.v_heads + h) * DK) * Dv + j;
  float col[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) col[i] = S[std::int64_t(i) * Dv];
  // Snapshots (verify rows only; the branch is the same for the whole block).
  const int snapshots = kSnapshots && row.snapshot != 0 ? min(row.count, st.max_snapshots) : 0;
  for (int n = 0; n < row.count; ++n) {
    const std::int64_t token = std::int64_t(row.first) + n;
    const bool keep = kSnapshots && n < snapshots;
    const std::int64_t snap = slot * st.max_snapshots + n;  // [slot, j]
    const std::uint16_t* const src =
        qkvz + token * d.qkvz_width + std::int64_t(kh) * (2 * DK + 2 * G * Dv);
    // The conv over this block's channels; the projections' q | k | v order per key head is the
    // local channel order, the conv's global channel is q, k or v's own range. Each channel's
    // window is its thread's alone (the same thread every token).
    for (int c = tid; c < channels; c += blockDim.x) {
      const int ch = c < DK       ? kh * DK + c
                     : c < 2 * DK ? d.key_dim + kh * DK + (c - DK)
                                  : 2 * d.key_dim + kh * G * Dv + (c - 2 * DK);
      float window[kMaxConvKernel];
      for (int i = 0; i < K - 1; ++i) window[i] = conv[std::int64_t(i) * d.conv_dim + ch];
      window[K - 1] = bf16_at(src, c);
      float acc = 0.0f;
      for (int i = 0; i < K; ++i)
        acc = fmaf(bf16_at(p.conv_weight, std::int64_t(ch) * K + i), window[i], acc);
      for (int i = 0; i < K - 1; ++i) conv[std::int64_t(i) * d.conv_dim + ch] = window[i + 1];
      if constexpr (kSnapshots) {
        if (keep) {
          float* const kept = st.snapshot_conv + snap * std::int64_t(K - 1) * d.conv_dim;
          for (int i = 0; i < K - 1; ++i) kept[std::int64_t(i) * d.conv_dim + ch] = window[i + 1];
        }
      }
      qkv[c] = silu(acc);
    }
    if (tid < G) {  // the gates of value head kh G + tid
      const std::uint16_t* gates = ba + token * d.ba_width + std::int64_t(kh) * 2 * G;
      deltanet::gates_of(bf16_at(gates, G + tid), bf16_at(gates, tid), p.A_log[kh * G + tid],
                         p.dt_bias[kh * G + tid], gate_g[tid], gate_beta[tid]);
    }
    __syncthreads();
    deltanet::qk_inverse_norms<DK>(qkv, norms, tid);
    __syncthreads();
    const float qs = norms[0], ks = norms[1];
    const float decay = __expf(gate_g[hh]), beta = gate_beta[hh];
    float kv = 0.0f;
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      col[i] *= decay;
      kv = fmaf(col[i], qkv[DK + i] * ks, kv);
    }
    const float u = beta * (qkv[2 * DK + hh * Dv + j] - kv);
    float o = 0.0f;
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      col[i] = fmaf(qkv[DK + i] * ks, u, col[i]);
      o = fmaf(col[i], qkv[i] * qs, o);
    }
    if constexpr (kSnapshots) {
      if (keep) {  // the same column layout as the slot's, coalesced over j
        float* const kept = st.snapshot_recurrent + ((snap * d.v_heads + h) * DK) * Dv + j;
#pragma unroll
        for (int i = 0; i < DK; ++i) kept[std::int64_t(i) * Dv] = col[i];
      }
    }
    // The gated RMSNorm over each value head's Dv outputs (its Dv / 32 warps).
    const float squares = warp_sum(o * o);
    if (tid % 32 == 0) head_sums[tid / 32] = squares;
    __syncthreads();
    const int warps = Dv / 32;
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += head_sums[hh * warps + w];
    const float z = bf16_at(src, 2 * DK + G * Dv + hh * Dv + j);
    const float y = p.norm_weight[j] * (o * rsqrtf(sum / float(Dv) + p.eps)) * silu(z);
    out[token * d.value_dim + std::int64_t(h) * Dv + j] =
        __bfloat16_as_ushort(__float2bfloat16_rn(y));
    __syncthreads();  // the next token's conv rewrites qkv, the gates and the sums
  }
#pragma unroll
  for (int i = 0; i < DK; ++i) S[std::int64_t(i) * Dv] = col[i];
}

template <int DK>
void launch(bool snapshots, dim3 grid, int threads, std::size_t smem, cudaStream_t stream,
            const Dims& d, const GatedDeltaNetRow* rows, const std::uint16_t* qkvz,
            const std::uint16_t* ba, const GatedDeltaNetDeviceParams& p,
            const GatedDeltaNetDeviceState& st, std::uint16_t* out, int skip_from) {
  if (snapshots)
    gated_deltanet_kernel<DK, true>
        <<<grid, threads, smem, stream>>>(d, rows, qkvz, ba, p, st, out, skip_from);
  else
    gated_deltanet_kernel<DK, false>
        <<<grid, threads, smem, stream>>>(d, rows, qkvz, ba, p, st, out, skip_from);
}

}  // namespace

cudaError_t gated_deltanet_mix(const GatedDeltaNetShape& shape, const GatedDeltaNetRow* rows,
                               int num_rows, const std::uint16_t* qkvz, const std::uint16_t* ba,
                               const GatedDeltaNetDeviceParams& params,
                               const GatedDeltaNetDeviceState& state, std::uint16_t* out,
                               cudaStream_t stream, int skip_from) {
  const GatedDeltaShape& h = shape.heads;
  const int threads = shape.group() * h.v_dim;
  if (h.k_heads < 1 || h.v_heads % h.k_heads != 0 || h.v_dim % 32 != 0 || threads < 64 ||
      threads > kMaxThreads || shape.conv_kernel < 2 || shape.conv_kernel > kMaxConvKernel ||
      num_rows < 0 || num_rows > 65535 ||
      (num_rows > 0 &&
       (rows == nullptr || qkvz == nullptr || ba == nullptr || out == nullptr ||
        state.conv == nullptr || state.recurrent == nullptr || params.conv_weight == nullptr ||
        params.A_log == nullptr || params.dt_bias == nullptr || params.norm_weight == nullptr)) ||
      state.max_snapshots < 0 ||
      (state.max_snapshots > 0 &&
       (state.snapshot_conv == nullptr || state.snapshot_recurrent == nullptr)))
    return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  const Dims d{h.k_heads,          h.v_heads,       h.v_dim,           shape.conv_kernel,
               shape.group(),      shape.key_dim(), shape.value_dim(), shape.conv_dim(),
               shape.qkvz_width(), shape.ba_width()};
  const std::size_t smem =
      sizeof(float) * std::size_t(2 * h.k_dim + threads + 2 * shape.group() + 2 + threads / 32);
  const dim3 grid(unsigned(h.k_heads), unsigned(num_rows));
  const bool snapshots = state.max_snapshots > 0;
  switch (h.k_dim) {
    case 32:
      launch<32>(snapshots, grid, threads, smem, stream, d, rows, qkvz, ba, params, state, out,
                 skip_from);
      break;
    case 64:
      launch<64>(snapshots, grid, threads, smem, stream, d, rows, qkvz, ba, params, state, out,
                 skip_from);
      break;
    case 128:
      launch<128>(snapshots, grid, threads, smem, stream, d, rows, qkvz, ba, params, state, out,
                  skip_from);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace nibble::kernels
