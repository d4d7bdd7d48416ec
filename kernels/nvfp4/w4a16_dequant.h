#pragma once
// The W4A16 layout (w4a16_layout.h) dequantised to a dense BF16 matrix on the GPU, for the
// dequantise-then-cuBLAS path of large M (w4a16_dense.h). Bandwidth-bound: it reads the layout's
// 0.5625 bytes per weight once and writes 2.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {

// out[r - row_begin, c] = BF16 of e2m1 * scale of weight element (r, c) (e4m3, or 2^(s - 127) for
// MXFP4: nvfp4::w4a16_scale_value) for r in [row_begin,
// min(row_begin + rows, w.n)) and c in [0, w.k): exact (at most 6 significant bits), WITHOUT
// the global factor (the GEMM applies it). Row stride w.k elements. row_begin must be a multiple
// of 128 (a weight group), out 16-byte aligned; cudaErrorInvalidValue otherwise. CPU reference:
// nvfp4::w4a16_dequantize_rows.
cudaError_t w4a16_dequantize(const W4A16DeviceWeight& w, std::int64_t row_begin, std::int64_t rows,
                             std::uint16_t* out, cudaStream_t stream);

}  // namespace nibble::kernels
