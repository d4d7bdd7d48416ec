#pragma once
// The FP8 KV cache's scale rule (format: kernels/attention/kv_fp8_ref.h), one definition for the
// host reference and the store kernel; C++17 so that nvcc compiles it too.
#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace nibble::kernels {

// The BF16 bits of the scale of a row whose largest magnitude is amax: amax / 448 rounded up to
// BF16 (so that amax / scale never exceeds 448), 1.0 for a row of zeros (or no finite range).
// One definition for the host reference and the store kernel (kernels/layer/layer_ops.cu).
NIBBLE_HOST_DEVICE inline std::uint16_t kv_fp8_scale(float amax) {
  if (!(amax > 0.0f) || !(amax <= 3.4028235e38f)) return 0x3f80;
  const float s = amax / 448.0f;
  std::uint32_t u;
  std::memcpy(&u, &s, sizeof u);
  if (u & 0xffffu) u = (u & 0xffff0000u) + 0x10000u;
  return std::uint16_t(u >> 16);
}

}  // namespace nibble::kernels
