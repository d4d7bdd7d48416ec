#pragma once
// A projection of speculative decoding's speed-up from measured step costs, in units of one
// decode step without a draft. nibble-spec-bench measures, on a GPU, a verify step of k drafts
// with every draft accepted (its oracle drafter) and with none accepted (its always-wrong
// drafter). A run at k is projected only with k's own measurement: a step with a of its d <= k
// drafts accepted is charged none + (all - none) * a / d (a verify step of fewer rows is charged
// as one of k: at batch 1 its cost barely moves with the rows), a step without a draft 1. The
// projection is emitted tokens over charged steps: the decode-only time of the same tokens over
// the speculative time.
#include <map>
#include <string>

#include "tools/ngram-bench/teacher_forced.h"

namespace nibble::tools {

struct VerifyCost {
  double all_accepted = 0, none_accepted = 0;  // decode steps
};

// k -> cost, parsed from "K:ALL:NONE" items (e.g. "4:2.955:1.825"); throws std::invalid_argument
// with the offending item.
using VerifyCosts = std::map<int, VerifyCost>;
void parse_verify_cost(const std::string& item, VerifyCosts& costs);

// Charged decode steps of the statistics' steps; throws std::invalid_argument where costs has no
// measurement at stats.k.
double charged_steps(const DraftStats& stats, const VerifyCosts& costs);
inline double projected_speedup(const DraftStats& stats, const VerifyCosts& costs) {
  return double(stats.tokens) / charged_steps(stats, costs);
}

}  // namespace nibble::tools
