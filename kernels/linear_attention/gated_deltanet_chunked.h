#pragma once
// Gated DeltaNet's token mixing for long rows (prompt chunks): the function of gated_deltanet_mix
// (gated_deltanet.h) with the delta rule in its chunked WY form (gated_delta_ref.h's
// gated_delta_chunked_ref) on tensor cores, and the dispatcher that sends each row of a step to
// this form or to the recurrent one by its token count.
//
// The chunked form, per row, in five launches on the stream:
//   1. prepare: the conv1d + SiLU over q, k, v (the window from the slot), the L2 norms, the gates:
//      BF16 q, k, v and FP32 g, beta to the workspace, one block per (token, key head);
//   2. window: the slot's conv window advanced to the row's last inputs;
//   3. wy: per (chunk of 64 tokens, value head) the cumulative decay G, the unit lower-triangular
//      system (I + A) with A[i][j] = beta_i exp(G_i - G_j) k_i.k_j (j < i) inverted by forward
//      substitution in FP32, W = T diag(beta exp(G)) K and U = T diag(beta) V on tensor cores
//      (BF16 operands, FP32 accumulators), W and U to the workspace (U over V);
//   4. state: per (value head, 32 value columns) the chunks in order, the state slice in FP32
//      registers: U' = U - W S, O = exp(G) Q S + (causal exp(G_i - G_j) Q K^T) U',
//      S <- exp(G_last) S + K^T (exp(G_last - G_j) U'); O (before the norm) to `out` in BF16;
//   5. norm: the gated RMSNorm over each value head's outputs with z, in place.
// Shared memory <= 85 KB a block (GB10's limit is ~100 KB); mma.sync only (sm_80 and later).
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/linear_attention/gated_deltanet_chunk_map.h"  // kGatedDeltaChunk

namespace nibble::kernels {

// Rows of at least this many tokens take the chunked form. From test_gated_deltanet_gpu --bench
// (H100, 2026-12-07, the 80B's layer, one row): the recurrent form's time over the chunked one's
// 0.63 at 8 tokens, 1.14 at 16, 1.64 at 24, 3.95 at 64, 18.4 at 8,192.
inline constexpr int kGatedDeltaChunkedMinTokens = 16;

// k_dim 64 or 128, v_dim 64 or 128, conv_kernel 2..8, group * v_dim >= 64 (the recurrent form's
// own limits, which the dispatcher may fall back to).
bool gated_deltanet_chunked_supported(const GatedDeltaNetShape& shape);

// Workspace bytes for steps of up to `tokens` tokens (0 when the shape is not supported).
std::size_t gated_deltanet_chunked_workspace_bytes(const GatedDeltaNetShape& shape,
                                                   std::int64_t tokens);

struct GatedDeltaNetWorkspace {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

// The rows of `rows` (device, num_rows) with count >= min_tokens through the chunked form; the
// others are left alone. tokens: the step's packed tokens (sizes the grids; rows lie inside).
// Capturable in a CUDA graph. cudaErrorInvalidValue for an unsupported shape or a workspace
// smaller than gated_deltanet_chunked_workspace_bytes(shape, tokens).
cudaError_t gated_deltanet_mix_chunked(
    const GatedDeltaNetShape& shape, const GatedDeltaNetRow* rows, int num_rows,
    std::int64_t tokens, int min_tokens, const std::uint16_t* qkvz, const std::uint16_t* ba,
    const GatedDeltaNetDeviceParams& params, const GatedDeltaNetDeviceState& state,
    const GatedDeltaNetWorkspace& workspace, std::uint16_t* out, cudaStream_t stream);

// A step's rows as the host knows them: on the device, how many, the packed token count and the
// longest row's count (0: unknown; then every row runs the recurrent form).
struct GatedDeltaNetStepRows {
  const GatedDeltaNetRow* rows = nullptr;
  int num_rows = 0;
  std::int64_t tokens = 0;
  int longest = 0;
};

// gated_deltanet_mix's function for a step: rows of count >= min_tokens through the chunked form
// when the shape supports it and some row is that long (then the workspace must hold
// gated_deltanet_chunked_workspace_bytes(shape, rows.tokens)), every other row through the
// recurrent form. A step whose longest row is short (decode) launches the recurrent kernel only.
cudaError_t gated_deltanet_mix_step(
    const GatedDeltaNetShape& shape, const GatedDeltaNetStepRows& rows, const std::uint16_t* qkvz,
    const std::uint16_t* ba, const GatedDeltaNetDeviceParams& params,
    const GatedDeltaNetDeviceState& state, const GatedDeltaNetWorkspace& workspace,
    std::uint16_t* out, cudaStream_t stream, int min_tokens = kGatedDeltaChunkedMinTokens);

}  // namespace nibble::kernels
