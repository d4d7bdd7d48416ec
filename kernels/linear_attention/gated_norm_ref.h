#pragma once
// CPU reference of Gated DeltaNet's output norm (transformers' Qwen3NextRMSNormGated): per value
// head, an RMSNorm of the delta rule's output with a plain weight (not zero-centred, unlike the
// model's other norms), times silu of the z branch:
//   y = w * x / sqrt(mean(x^2) + eps) * silu(z)
#include <cstdint>
#include <span>

namespace nibble::kernels {

// x, z, y [rows, dim] (a row: one token's one value head); weight [dim].
void gated_rms_norm_ref(std::int64_t rows, int dim, std::span<const float> x,
                        std::span<const float> z, std::span<const float> weight, float eps,
                        std::span<float> y);

}  // namespace nibble::kernels
