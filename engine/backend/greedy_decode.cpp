#include "engine/backend/greedy_decode.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace nibble::backend {

namespace {

// Largest first, ties by the lower id, NaN after every number: a strict weak order.
bool ranks_before(const std::vector<float>& logits, std::int32_t a, std::int32_t b) {
  const float va = logits[std::size_t(a)], vb = logits[std::size_t(b)];
  if (std::isnan(va) || std::isnan(vb)) return std::isnan(vb) && (!std::isnan(va) || a < b);
  return va > vb || (va == vb && a < b);
}

}  // namespace

// Small k (the usual): one pass keeping a sorted list of k entries, which most of the row leaves
// at one compare, with no id array of the row's size to fill each step (the pick is part of every
// decode step's time: ~0.15 ms for a 152k-entry row on the device machine). Large k: a partial
// sort of every id, whose cost does not grow with k times the row.
std::vector<std::pair<std::int32_t, float>> top_logits(const std::vector<float>& logits, int k) {
  constexpr int kListMax = 64;
  k = std::min<int>(std::max(k, 0), int(logits.size()));
  std::vector<std::int32_t> ids;
  ids.reserve(std::size_t(k) + 1);
  if (k > kListMax) {
    ids.resize(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t(i);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int32_t a, std::int32_t b) {
      return ranks_before(logits, a, b);
    });
    ids.resize(std::size_t(k));
  } else if (k > 0) {
    // Once the list is full, a later id ranks before its last entry only with a larger number
    // (or any number, while that entry is NaN): the one compare most of the row stops at.
    bool full = false, floor_nan = false;
    float floor = 0.0f;
    for (std::int32_t i = 0; i < std::int32_t(logits.size()); ++i) {
      const float v = logits[std::size_t(i)];
      if (full && (floor_nan ? std::isnan(v) : !(v > floor))) continue;
      auto at = std::find_if(ids.begin(), ids.end(),
                             [&](std::int32_t e) { return ranks_before(logits, i, e); });
      ids.insert(at, i);
      if (int(ids.size()) > k) ids.pop_back();
      full = int(ids.size()) == k;
      floor = logits[std::size_t(ids.back())];
      floor_nan = std::isnan(floor);
    }
  }
  std::vector<std::pair<std::int32_t, float>> out;
  out.reserve(ids.size());
  for (std::int32_t i : ids) out.push_back({i, logits[std::size_t(i)]});
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
