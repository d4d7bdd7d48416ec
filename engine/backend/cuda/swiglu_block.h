#pragma once
// A SwiGLU MLP on the device: out = residual + down(silu(gate(in)) * up(in)). The dense layers'
// MLP and, when MoE routes through the host, each expert over its slice of the routed rows.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_linear.h"
#include "engine/backend/cuda/device_model.h"
#include "kernels/kernel_options.h"

namespace nibble::backend::cuda {

// in: [rows, H]; projected: room for [rows, 2 I] (the gate and up outputs); middle: [rows, I]
// (silu(gate) * up); out: [rows, H], residual (which may be null) added; out must not alias it.
void run_swiglu(LinearRunner& linears, const DeviceMlp& mlp, const std::uint16_t* in,
                std::int64_t rows, const std::uint16_t* residual, std::uint16_t* out,
                std::uint16_t* projected, std::uint16_t* middle, cudaStream_t stream,
                const kernels::LayerOptions& options);

}  // namespace nibble::backend::cuda
