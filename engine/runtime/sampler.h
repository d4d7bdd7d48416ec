#pragma once
// Turns one row of logits into the next token of one sequence.
// Order, as in vLLM: penalties (repetition, then frequency/presence) -> temperature ->
// top-k -> top-p -> min-p -> draw. Log-probabilities reported to the client are those of
// the raw logits (log-softmax before any processing), as vLLM reports them by default.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/runtime/sampling_params.h"

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

// Per-sequence random state: seeded from the request's seed so that the same seed and
// parameters give the same tokens whatever else is in the batch.
class SamplerRng {
 public:
  explicit SamplerRng(std::uint64_t seed) : engine_(seed) {}
  float uniform() { return std::uniform_real_distribution<float>(0.0f, 1.0f)(engine_); }

 private:
  std::mt19937_64 engine_;
};

// prompt and output are the sequence's tokens so far (penalties look at them). allowed, when
// not empty, is a token bitmask (engine/structured/token_bitmask.h) applied after the
// penalties, as vLLM applies logits processors; the reported logprobs stay those of the raw
// logits.
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int> prompt, std::span<const int> output, SamplerRng& rng,
                          std::span<const std::uint32_t> allowed = {});

// log-softmax of raw logits, computed in double for stability.
std::vector<float> log_softmax(std::span<const float> logits);

}  // namespace nibble::runtime
