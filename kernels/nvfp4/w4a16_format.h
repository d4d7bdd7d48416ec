#pragma once
// Which scale bytes a W4A16 layout holds (w4a16_layout.h): E4M3 codes (NVFP4) or E8M0 exponents
// (MXFP4, gpt-oss's experts). The kernels are instantiated per format (w4a16_device.cuh
// scales_to_bf16x2), so the NVFP4 kernels are the same code with or without MXFP4 beside them.
#include <cstdint>

namespace nibble::nvfp4 {

enum class W4A16Format : std::uint8_t { kNvfp4, kMxfp4 };

}  // namespace nibble::nvfp4
