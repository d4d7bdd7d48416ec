#include "tools/ngram-bench/teacher_forced.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace nibble::tools {

DraftStats::DraftStats(int max_draft)
    : k(max_draft),
      steps_by(std::size_t(max_draft + 1), std::vector<long>(std::size_t(max_draft + 1), 0)) {}

void DraftStats::add(const DraftStats& o) {
  if (o.k != k) throw std::invalid_argument("draft statistics of different k do not add up");
  steps += o.steps;
  tokens += o.tokens;
  drafted += o.drafted;
  accepted += o.accepted;
  proposals += o.proposals;
  propose_seconds += o.propose_seconds;
  for (std::size_t d = 0; d < steps_by.size(); ++d)
    for (std::size_t a = 0; a < steps_by[d].size(); ++a) steps_by[d][a] += o.steps_by[d][a];
}

double DraftStats::accepted_at(int p) const {
  long reached = 0, kept = 0;
  for (int d = p + 1; d <= k; ++d)
    for (int a = 0; a <= d; ++a) {
      reached += steps_by[std::size_t(d)][std::size_t(a)];
      if (a > p) kept += steps_by[std::size_t(d)][std::size_t(a)];
    }
  return reached ? double(kept) / double(reached) : 0.0;
}

long DraftStats::steps_with_draft() const {
  long n = 0;
  for (int d = 1; d <= k; ++d)
    for (long s : steps_by[std::size_t(d)]) n += s;
  return n;
}

DraftStats teacher_forced(const spec::Drafter& drafter, std::span<const int> prompt,
                          std::span<const int> answer, int k) {
  if (k < 1) throw std::invalid_argument("k must be at least 1");
  DraftStats stats(k);
  std::vector<int> sequence(prompt.begin(), prompt.end());
  sequence.reserve(prompt.size() + answer.size());
  std::vector<int> draft;
  std::size_t done = 0;
  while (done < answer.size()) {
    draft.clear();
    const auto t0 = std::chrono::steady_clock::now();
    drafter.propose(sequence, k, draft);
    stats.propose_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats.proposals;
    // A drafter that over-proposes is held to k, as the engine holds it.
    const std::size_t d = std::min<std::size_t>(draft.size(), std::size_t(k));
    std::size_t a = 0;
    while (a < d && done + a < answer.size() && draft[a] == answer[done + a]) ++a;
    // The accepted tokens and the target's own next one, within what is left of the answer.
    const std::size_t emitted = std::min(a + 1, answer.size() - done);
    sequence.insert(sequence.end(), answer.begin() + std::ptrdiff_t(done),
                    answer.begin() + std::ptrdiff_t(done + emitted));
    done += emitted;
    ++stats.steps;
    stats.tokens += long(emitted);
    stats.drafted += long(d);
    stats.accepted += long(a);
    ++stats.steps_by[d][a];
  }
  return stats;
}

}  // namespace nibble::tools
