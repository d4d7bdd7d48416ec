#include "engine/backend/greedy_decode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace nibble::backend {

// One pass with a sorted list of at most k entries: a 152k-entry row in ~0.1 ms on one core,
// against ~0.17 ms for a partial sort of its ids (it is part of every decode step's time). NaN
// logits rank below every number and among themselves by id.
std::vector<std::pair<std::int32_t, float>> top_logits(const std::vector<float>& logits, int k) {
  using Entry = std::pair<std::int32_t, float>;
  k = std::min<int>(std::max(k, 0), int(logits.size()));
  std::vector<Entry> out;
  out.reserve(std::size_t(k) + 1);
  if (k == 0) return out;
  float floor = -std::numeric_limits<float>::infinity();
  bool full = false;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (full ? !(v > floor) : std::isnan(v)) continue;
    // After every entry of value >= v: among equal logits the lower id (seen first) stays first.
    auto at = std::find_if(out.begin(), out.end(), [v](const Entry& e) { return v > e.second; });
    out.insert(at, {std::int32_t(i), v});
    if (int(out.size()) > k) out.pop_back();
    full = int(out.size()) == k;
    if (full) floor = out.back().second;
  }
  for (std::size_t i = 0; !full && i < logits.size(); ++i) {
    if (!std::isnan(logits[i])) continue;
    out.push_back({std::int32_t(i), logits[i]});
    full = int(out.size()) == k;
  }
  return out;
}

GreedyTrace greedy_decode(Backend& backend, const std::vector<std::int32_t>& prompt, int new_tokens,
                          int top_k, const StepCallback& on_step) {
  if (prompt.empty()) throw BackendError("greedy decode: the prompt is empty");
  if (new_tokens < 1) throw BackendError("greedy decode: needs at least one new token");
  using clock = std::chrono::steady_clock;
  GreedyTrace trace;
  auto seq = backend.new_sequence(int(prompt.size()) + new_tokens);
  std::vector<float> logits(std::size_t(backend.config().vocab_size));
  std::vector<std::int32_t> input = prompt;
  for (int step = 0; step < new_tokens; ++step) {
    const auto start = clock::now();
    backend.forward(*seq, input, logits);
    const auto picking = clock::now();
    StepLogits s;
    s.top = top_logits(logits, std::max(top_k, 1));
    s.token = s.top[0].first;
    // The host's pick is part of the step, as the device's is in greedy_decode_on_device.
    const auto end = clock::now();
    const double seconds = std::chrono::duration<double>(end - start).count();
    (step == 0 ? trace.prefill_seconds : trace.decode_seconds) += seconds;
    if (step > 0) trace.pick_seconds += std::chrono::duration<double>(end - picking).count();
    if (on_step) on_step(step, s, logits);
    input = {s.token};
    trace.steps.push_back(std::move(s));
  }
  return trace;
}

}  // namespace nibble::backend
