#pragma once
// Device pieces both sampling kernels use (sample_rows.cu, sample_rows_split.cu): float keys,
// the online softmax merge, the radix select's choice of a bin, the top-N list's order. CUDA
// device code only; C++17.
#include <cmath>
#include <cstdint>

#include "kernels/sampling/sampling_types.h"

namespace nibble::kernels::sampling_device {

constexpr int kThreads = 1024;  // a block: one SM's worth of registers at 64 a thread
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;  // a radix select pass: 8 bits of the key

struct RawTop {  // plain (no initialisers): shared memory takes no constructors
  int token;
  float logit;
};

__device__ __forceinline__ unsigned long long umax(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

__device__ __forceinline__ std::uint32_t key_of(float v) {
  return sampling_math::order_key(__float_as_uint(v));
}
__device__ __forceinline__ float float_of_key(std::uint32_t key) {
  return __uint_as_float(sampling_math::float_bits_of_key(key));
}

// (max, sum of exp(x - max)) of a share of the row merged with another's. Symmetric: a butterfly
// over lanes gives every lane the same bits.
__device__ __forceinline__ void merge_softmax(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float n = fmaxf(m, m2);
  s = s * expf(m - n) + s2 * expf(m2 - n);
  m = n;
}

// One element into a running (max, sum of exp(x - max)): one expf an element.
__device__ __forceinline__ void add_softmax(float& m, float& s, float v) {
  if (v == -INFINITY) return;
  if (v > m) {
    s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
    m = v;
  } else {
    s += expf(v - m);
  }
}

// One radix select pass's choice, by the 32 lanes of one warp: walking hist's bins from the top,
// the bin where the running weight reaches target. The lane that finds it writes the new prefix
// (prefix | bin << shift) and the weight still to find inside the bin. top_p > 0: the target is
// top_p_target(top_p, the histogram's total) instead (the first pass of a top-p select).
__device__ __forceinline__ void choose_bin(const unsigned long long* hist,
                                           unsigned long long target, float top_p,
                                           std::uint32_t prefix, int shift,
                                           std::uint32_t& new_prefix,
                                           unsigned long long& new_target) {
  const int lane = int(threadIdx.x & 31);
  // Lane l holds bins 255 - 8l down to 248 - 8l: lanes in order walk the bins from the top.
  unsigned long long lane_sum = 0;
  for (int j = 0; j < 8; ++j) lane_sum += hist[kBins - 1 - 8 * lane - j];
  unsigned long long inclusive = lane_sum;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  if (top_p > 0.0f)
    target = sampling_math::top_p_target(top_p, __shfl_sync(0xffffffffu, inclusive, 31));
  const unsigned ballot = __ballot_sync(0xffffffffu, inclusive >= target);
  const int first = ballot != 0u ? __ffs(int(ballot)) - 1 : 31;
  if (lane == first) {
    unsigned long long above = inclusive - lane_sum;
    int chosen = kBins - 1 - 8 * lane - 7;  // not reached unless the weights fall short
    for (int j = 0; j < 8; ++j) {
      const int bin = kBins - 1 - 8 * lane - j;
      if (above + hist[bin] >= target) {
        chosen = bin;
        break;
      }
      above += hist[bin];
    }
    new_prefix = prefix | (std::uint32_t(chosen) << shift);
    new_target = target > above ? target - above : 1;
  }
}

// A top-N list (at most 32 entries) in order: larger logit first, then lower id. One thread.
__device__ __forceinline__ void sort_top(RawTop* top, int count) {
  for (int a = 1; a < count; ++a) {
    const RawTop e = top[a];
    const unsigned long long ke = sampling_math::pack_argmax(key_of(e.logit), e.token);
    int b = a - 1;
    while (b >= 0 && sampling_math::pack_argmax(key_of(top[b].logit), top[b].token) < ke) {
      top[b + 1] = top[b];
      --b;
    }
    top[b + 1] = e;
  }
}

}  // namespace nibble::kernels::sampling_device
