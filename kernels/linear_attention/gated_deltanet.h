#pragma once
// Gated DeltaNet's token mixing on the device (Qwen3-Next's linear-attention layers): the function
// of gated_deltanet_ref.h (conv1d + SiLU over q, k, v, the gates, the gated delta rule, the gated
// RMSNorm with z) between the layer's in_proj and out_proj, with each sequence's conv window and
// delta-rule state in a slot of the hybrid state pool.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/linear_attention/gated_deltanet_shape.h"

namespace nibble::kernels {

struct GatedDeltaNetDeviceParams {
  const std::uint16_t* conv_weight = nullptr;  // [conv_dim, conv_kernel] BF16
  const float* A_log = nullptr;                // [v_heads]
  const float* dt_bias = nullptr;              // [v_heads]
  const float* norm_weight = nullptr;          // [v_dim]
  float eps = 1e-6f;
};

// Per slot: conv [conv_kernel - 1, conv_dim] FP32 (the window's last inputs, oldest first) and
// recurrent [v_heads, k_dim, v_dim] FP32; GatedDeltaNetShape::conv_state_floats() and
// heads.state_floats() floats a slot, slots contiguous.
// Snapshots, for speculative decoding's rollback past rejected drafts: per slot max_snapshots
// copies of both, [slot, j, floats of one] with j the row's token after which it was taken; only
// rows with GatedDeltaNetRow::snapshot write them. max_snapshots 0 (the arrays null) for launches
// without such rows: they then run the kernel's form without snapshot code, as fast as before.
struct GatedDeltaNetDeviceState {
  float* conv = nullptr;
  float* recurrent = nullptr;
  float* snapshot_conv = nullptr;
  float* snapshot_recurrent = nullptr;
  int max_snapshots = 0;
};

// A row: one sequence's chunk of a step, tokens [first, first + count) of the step's packed
// token arrays, its conv window and state in `slot` (rows of a launch use distinct slots). A
// decode row is a chunk of one token; a prompt split into chunks at any token gives the results of
// one chunk. snapshot 1 (a verify row: a decode token and its drafts): the state after each of
// the row's first max_snapshots tokens is also written to the slot's snapshots; 0 (decode and
// prompt rows) writes none, at no extra traffic.
struct GatedDeltaNetRow {
  std::int32_t slot = 0, first = 0, count = 0;
  std::int32_t snapshot = 0;
};

// qkvz [tokens, qkvz_width] and ba [tokens, ba_width] BF16 (the projections' outputs), rows
// [num_rows] on the device, out [tokens, value_dim] BF16 (the rows' tokens written). One block per
// (row, key head), one thread per (value head of the group, value column), the column of the state
// in registers over the row's tokens: the state is read and written once per row. A row's tokens
// run in order (the recurrent form; gated_deltanet_chunked.h has the tensor-core form for long
// rows).
// Supported: k_dim 32, 64 or 128; v_dim a multiple of 32; 64 <= group v_dim <= 256;
// conv_kernel 2..8; max_snapshots >= 0, with both snapshot arrays where > 0.
// cudaErrorInvalidValue otherwise. Capturable in a CUDA graph. Rows that take the chunked form
// (takes_chunked_form: count >= skip_from and no snapshots) are left alone
// (gated_deltanet_chunked.h's dispatcher gives them to the chunked form).
cudaError_t gated_deltanet_mix(const GatedDeltaNetShape& shape, const GatedDeltaNetRow* rows,
                               int num_rows, const std::uint16_t* qkvz, const std::uint16_t* ba,
                               const GatedDeltaNetDeviceParams& params,
                               const GatedDeltaNetDeviceState& state, std::uint16_t* out,
                               cudaStream_t stream, int skip_from = INT_MAX);

}  // namespace nibble::kernels
