// The per-row choice between Gated DeltaNet's recurrent and chunked forms
// (gated_deltanet_chunked.h's gated_deltanet_mix_step).
#include "kernels/linear_attention/gated_deltanet_chunked.h"

namespace nibble::kernels {

cudaError_t gated_deltanet_mix_step(const GatedDeltaNetShape& shape,
                                    const GatedDeltaNetStepRows& rows, const std::uint16_t* qkvz,
                                    const std::uint16_t* ba,
                                    const GatedDeltaNetDeviceParams& params,
                                    const GatedDeltaNetDeviceState& state,
                                    const GatedDeltaNetWorkspace& workspace, std::uint16_t* out,
                                    cudaStream_t stream, int min_tokens) {
  // Decode steps (every row short) and shapes the chunked form lacks: the recurrent form alone,
  // one launch, as the decode graphs capture it.
  const bool chunked =
      min_tokens >= 1 && rows.longest >= min_tokens && gated_deltanet_chunked_supported(shape);
  // Check, then launch: a short workspace fails the step before either form has run.
  if (chunked && (workspace.ptr == nullptr ||
                  workspace.bytes < gated_deltanet_chunked_workspace_bytes(shape, rows.tokens)))
    return cudaErrorInvalidValue;
  const cudaError_t err = gated_deltanet_mix(shape, rows.rows, rows.num_rows, qkvz, ba, params,
                                             state, out, stream, chunked ? min_tokens : INT_MAX);
  if (err != cudaSuccess || !chunked) return err;
  return gated_deltanet_mix_chunked(shape, rows.rows, rows.num_rows, rows.tokens, min_tokens, qkvz,
                                    ba, params, state, workspace, out, stream);
}

}  // namespace nibble::kernels
