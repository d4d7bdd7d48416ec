#pragma once
// Turns one row of logits into the next token of one sequence.
// Order, as in vLLM: penalties (repetition, then frequency/presence) -> temperature ->
// top-k -> top-p -> min-p -> draw. Log-probabilities reported to the client are those of
// the raw logits (log-softmax before any processing), as vLLM reports them by default.
// The function is kernels/sampling/sampling_types.h's, drawn through its CPU reference: the
// CUDA backend's device sampling gives the same tokens for the same logits and seed. Tokens tied
// with the top-k or top-p threshold all stay (vLLM's rule).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/runtime/sampling_params.h"
#include "kernels/sampling/sampling_types.h"

namespace nibble::runtime {

struct TokenLogprob {
  int token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int token = 0;
  float logprob = 0.0f;                    // of the chosen token, raw distribution
  std::vector<TokenLogprob> top_logprobs;  // size params.logprobs, most likely first
};

// Per-sequence random state: the request's seed and the number of tokens drawn so far, the key
// and counter of the counter-based generator (Philox) the draw uses, so that the same seed and
// parameters give the same tokens whatever else is in the batch, on the CPU or the device.
class SamplerRng {
 public:
  explicit SamplerRng(std::uint64_t seed) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::uint64_t position() const { return position_; }
  void advance() { ++position_; }

 private:
  std::uint64_t seed_;
  std::uint64_t position_ = 0;
};

// The sampling pass's parameters of one row (penalty list and bitmask placement left unset).
kernels::SamplingRow sampling_row(const SamplingParams& params, const SamplerRng& rng);

// prompt and output are the sequence's tokens so far (penalties look at them); advances rng.
// allowed, when not empty, is a token bitmask (engine/structured/token_bitmask.h) applied after the
// penalties, as vLLM applies logits processors; the reported logprobs stay those of the raw
// logits.
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int> prompt, std::span<const int> output, SamplerRng& rng,
                          std::span<const std::uint32_t> allowed = {});

// log-softmax of raw logits, computed in double for stability.
std::vector<float> log_softmax(std::span<const float> logits);

}  // namespace nibble::runtime
