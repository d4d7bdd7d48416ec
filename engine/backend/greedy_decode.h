#pragma once
// Greedy decoding on any Backend, recording each step's top logits: the debugging path behind
// `nibble-engine generate` and the oracle tests (not the serving sampler).
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend {

struct StepLogits {
  std::int32_t token = 0;                           // argmax (lowest id on ties)
  std::vector<std::pair<std::int32_t, float>> top;  // top_k (id, logit), largest first
};

struct GreedyTrace {
  std::vector<StepLogits> steps;  // steps[0] follows the prompt, then one per decoded token
  double prefill_seconds = 0;
  double decode_seconds = 0;  // all steps after the first, each with its host pick
  double pick_seconds = 0;    // the host picks' share of decode_seconds
};

// Runs the prompt, then feeds back the argmax `new_tokens - 1` times (new_tokens >= 1).
// on_step, if set, is called as each step completes, with that step's full logits.
// Throws BackendError.
using StepCallback =
    std::function<void(int step, const StepLogits& s, const std::vector<float>& logits)>;
GreedyTrace greedy_decode(Backend& backend, const std::vector<std::int32_t>& prompt, int new_tokens,
                          int top_k, const StepCallback& on_step = nullptr);

// The k largest logits, largest first; ties broken by the lower id.
std::vector<std::pair<std::int32_t, float>> top_logits(const std::vector<float>& logits, int k);

}  // namespace nibble::backend
