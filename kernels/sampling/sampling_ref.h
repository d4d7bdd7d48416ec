#pragma once
// The CPU reference of the device sampling pass (sample_rows.h): the function sampling_types.h
// defines, computed row by row in plain loops (full sorts where the device searches thresholds),
// with the same random numbers and the same integer masses, so that the device gives the same
// token ids wherever no two candidates are within rounding of each other. The engine's CPU
// sampler (engine/runtime/sampler.cpp) draws through it, so CPU and CUDA engines give the same
// tokens for the same seed.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling/sampling_types.h"

namespace nibble::kernels {

// One row. logits: vocab floats (not modified); penalties: the row's list (tokens unique, ids
// outside the vocabulary ignored); bitmask: bitmask_words(vocab) words or empty (none).
// top receives min(row.num_top_logprobs, vocab) entries, most likely first; the returned token's
// logprob and top's are those of the raw logits. logprobs false: neither is computed (the host
// sampler skips the pass over the row when the request asks for none; logprob is then 0).
SampledRow sample_row_reference(std::span<const float> logits, const SamplingRow& row,
                                std::span<const SamplingPenalty> penalties,
                                std::span<const std::uint32_t> bitmask,
                                std::vector<TopLogprob>& top, bool logprobs = true);

// The tokens the row may draw (step 5): ascending ids; for tests of the thresholds.
std::vector<std::int32_t> kept_tokens_reference(std::span<const float> logits,
                                                const SamplingRow& row,
                                                std::span<const SamplingPenalty> penalties,
                                                std::span<const std::uint32_t> bitmask);

}  // namespace nibble::kernels
