#pragma once
// Batched sampling of next tokens from FP32 logits, on the device (sample_rows.h) and on the CPU
// (sampling_ref.h), computing the same function: the same order of operations, the same
// counter-based random numbers, the same integer arithmetic where results must agree exactly.
//
// Per row r (one sequence), over its vocab logits x:
//  1. Reported log-probabilities are those of the raw logits: x_i - logsumexp(x) (vLLM's default),
//     for the sampled token and for the row's num_top_logprobs most likely tokens (ties: lower id).
//  2. Penalties, from the row's (token, output_count) list, tokens unique: repetition (HF: a
//     positive logit divided by it, a negative one multiplied) on every listed token, then
//     frequency * output_count + presence subtracted where output_count > 0.
//  3. The structured-output bitmask (engine/structured/token_bitmask.h words): disallowed -> -inf.
//  4. temperature <= 0: greedy, the largest logit, ties to the lower id. Otherwise y = z / T and:
//  5. top-k, top-p, min-p as thresholds, found without sorting (sample_rows.h says how):
//     keep y >= t_k (the k-th largest y; every token tied with it stays, as in vLLM);
//     with w_i = exp(y_i - max y) in 32.32 fixed point (integer sums: exact, order-free), keep
//     y >= t_p, the largest value whose kept mass reaches floor(top_p * mass of the top-k set);
//     keep w_i >= min_p (min-p relative to the most likely token).
//  6. The draw, an exponential race: the kept token maximising w_i / e_i, e_i ~ Exp(1) from
//     Philox4x32-10 keyed by the row's seed, counter (token / 4, position): P(i wins) = w_i / sum
//     of kept w, an exact draw from the renormalised distribution; the token's random number
//     depends only on (seed, position, token), so a sequence draws the same tokens whatever its
//     place in the batch and in every run.
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace nibble::kernels {

// Top log-probabilities the device path computes per row (the server's default limit is 20).
inline constexpr int kMaxSampledTopLogprobs = 32;

// One token of a row's penalty list: in the prompt or the output; output_count times in the
// output (0: prompt only, only the repetition penalty applies).
struct SamplingPenalty {
  std::int32_t token = 0;
  std::int32_t output_count = 0;
};

struct SamplingRow {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1]; 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::int32_t top_k = 0;             // <= 0 or >= vocab: off
  std::int32_t num_top_logprobs = 0;  // 0..kMaxSampledTopLogprobs
  std::uint64_t seed = 0;
  std::uint64_t position = 0;        // the sequence's output position: the RNG counter
  std::int32_t penalty_offset = 0;   // the row's first entry in the step's penalty lists
  std::int32_t penalty_count = 0;    // 0: no penalties
  std::int32_t bitmask_offset = -1;  // the row's first word in the step's bitmasks; -1: none
  std::int32_t reserved = 0;
};

struct SampledRow {
  std::int32_t token = 0;
  float logprob = 0.0f;  // of the raw distribution
};

struct TopLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

namespace sampling_math {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
struct Philox4 {
  std::uint32_t v[4];
};

NIBBLE_HOST_DEVICE inline void mul_hi_lo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                         std::uint32_t& lo) {
  const std::uint64_t p = std::uint64_t(a) * std::uint64_t(b);
  hi = std::uint32_t(p >> 32);
  lo = std::uint32_t(p);
}

NIBBLE_HOST_DEVICE inline Philox4 philox4x32_10(Philox4 c, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mul_hi_lo(0xD2511F53u, c.v[0], hi0, lo0);
    mul_hi_lo(0xCD9E8D57u, c.v[2], hi1, lo1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The four random words for tokens [4 * group, 4 * group + 4) of a row at `position`.
NIBBLE_HOST_DEVICE inline Philox4 token_randoms(std::uint64_t seed, std::uint64_t position,
                                                std::uint32_t group) {
  const Philox4 counter{{group, std::uint32_t(position), std::uint32_t(position >> 32),
                         0x53414d50u /* "SAMP": this use of the key */}};
  return philox4x32_10(counter, std::uint32_t(seed), std::uint32_t(seed >> 32));
}

// An Exp(1) variate from 32 random bits: -log(1 - v), v uniform in (0, 1). The race is decided
// by the smallest variates (about 1/vocab), so v keeps float's full relative precision near 0:
// a 24-bit uniform would leave only ~100 distinct values there at vocab 152k, and ties.
NIBBLE_HOST_DEVICE inline float exponential_source(std::uint32_t bits) {
  const float v = (float(bits) + 0.5f) * (1.0f / 4294967296.0f);
  return v < 0.99999994f ? v : 0.99999994f;  // the largest float below 1
}
NIBBLE_HOST_DEVICE inline float exponential(std::uint32_t bits) {
  return -log1pf(-exponential_source(bits));
}

// Order-preserving map of a float's bits to an unsigned key (larger float, larger key).
NIBBLE_HOST_DEVICE inline std::uint32_t order_key(std::uint32_t float_bits) {
  return float_bits ^ ((float_bits >> 31) != 0u ? 0xffffffffu : 0x80000000u);
}

NIBBLE_HOST_DEVICE inline std::uint32_t float_bits_of_key(std::uint32_t key) {
  return key ^ ((key >> 31) != 0u ? 0x80000000u : 0xffffffffu);
}

// w in [0, 1] in 32.32 fixed point: a row's sum fits 64 bits for any vocabulary under 2^31.
NIBBLE_HOST_DEVICE inline std::uint64_t fixed_mass(float w) {
  return std::uint64_t(w * 4294967296.0f);
}

// top_p of a mass, as the integer the kept prefix must reach (at least 1).
NIBBLE_HOST_DEVICE inline std::uint64_t top_p_target(float top_p, std::uint64_t mass) {
  const auto target = std::uint64_t(double(top_p) * double(mass));
  return target > 0 ? target : 1;
}

// Larger score first, then lower id: the packed value's maximum is the argmax.
NIBBLE_HOST_DEVICE inline std::uint64_t pack_argmax(std::uint32_t key, std::int32_t id) {
  return (std::uint64_t(key) << 32) | std::uint64_t(~std::uint32_t(id));
}
NIBBLE_HOST_DEVICE inline std::int32_t unpack_argmax_id(std::uint64_t packed) {
  return std::int32_t(~std::uint32_t(packed));
}

// Step 2 for one listed token. Explicitly rounded on the device so that no multiply-add is fused:
// both sides round every operation alike.
NIBBLE_HOST_DEVICE inline float penalized_logit(float x, const SamplingRow& row,
                                                std::int32_t output_count) {
  float v = x;
  if (row.repetition_penalty != 1.0f)
    v = v > 0.0f ? v / row.repetition_penalty : v * row.repetition_penalty;
  if (output_count > 0 && (row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f)) {
#if defined(__CUDA_ARCH__)
    v = __fsub_rn(
        v, __fadd_rn(__fmul_rn(row.frequency_penalty, float(output_count)), row.presence_penalty));
#else
    const float product = row.frequency_penalty * float(output_count);
    v -= product + row.presence_penalty;
#endif
  }
  return v;
}

}  // namespace sampling_math
}  // namespace nibble::kernels
