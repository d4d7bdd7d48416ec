#pragma once
// What a drafter gets accepted when the target's output is known: the target is taken to answer
// `answer` after `prompt` (an ideal model for the workload). Each step the drafter proposes up to
// k tokens from the sequence so far; verification keeps the longest prefix equal to the answer's
// next tokens and adds one token of the target's own (the correction, or the bonus token after a
// fully accepted draft), as greedy verification does. No model runs, so acceptance on real text
// can be measured without real weights.
#include <span>
#include <vector>

#include "engine/spec/drafter.h"

namespace nibble::tools {

struct DraftStats {
  int k = 0;
  long steps = 0, tokens = 0, drafted = 0, accepted = 0;
  // steps_by[d][a]: steps that drafted d tokens and had a of them accepted (a <= d <= k).
  std::vector<std::vector<long>> steps_by;
  long proposals = 0;
  double propose_seconds = 0;  // wall time inside Drafter::propose

  explicit DraftStats(int max_draft = 0);
  void add(const DraftStats& other);
  double tokens_per_step() const { return steps ? double(tokens) / double(steps) : 0.0; }
  double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  double propose_us_per_step() const {
    return proposals ? 1e6 * propose_seconds / double(proposals) : 0.0;
  }
  // Steps whose draft reached position p (0-based) with it and every earlier position accepted,
  // over the steps that drafted at least p + 1 tokens.
  double accepted_at(int p) const;
  long steps_with_draft() const;
};

// One request: the steps to emit every token of `answer` (the last step may keep fewer drafts
// than it accepted, as a request's max_tokens cuts a draft).
DraftStats teacher_forced(const spec::Drafter& drafter, std::span<const int> prompt,
                          std::span<const int> answer, int k);

}  // namespace nibble::tools
