#include "engine/backend/greedy_decode.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace nibble::backend {

std::vector<std::pair<std::int32_t, float>> top_logits(const std::vector<float>& logits, int k) {
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min<int>(k, int(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](auto a, auto b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] ||
           (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  });
  std::vector<std::pair<std::int32_t, float>> out;
  for (int i = 0; i < k; ++i)
    out.push_back({ids[std::size_t(i)], logits[std::size_t(ids[std::size_t(i)])]});
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
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    (step == 0 ? trace.prefill_seconds : trace.decode_seconds) += seconds;
    StepLogits s;
    s.top = top_logits(logits, std::max(top_k, 1));
    s.token = s.top[0].first;
    if (on_step) on_step(step, s, logits);
    input = {s.token};
    trace.steps.push_back(std::move(s));
  }
  return trace;
}

}  // namespace nibble::backend
