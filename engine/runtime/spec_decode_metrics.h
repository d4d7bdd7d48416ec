#pragma once
// Speculative decoding's Prometheus counters, vLLM's spec_decode_* series under the nibble_
// prefix, registered only when a drafter is configured (as vLLM registers them). One draft is
// one sequence's proposal verified in one step. The mean acceptance length (tokens a verify
// step emits per sequence) is 1 + accepted_tokens / drafts.
#include <string>
#include <vector>

#include "metrics/registry.h"

namespace nibble::runtime {

struct SpecDecodeMetrics {
  SpecDecodeMetrics(metrics::Registry& registry, const std::string& model_name,
                    int num_speculative_tokens);

  // One verified draft of num_drafted tokens whose first num_accepted were accepted.
  void count(int num_drafted, int num_accepted);

  metrics::Counter& num_drafts;
  metrics::Counter& num_draft_tokens;
  metrics::Counter& num_accepted_tokens;
  std::vector<metrics::Counter*> accepted_per_pos;  // [position]: drafts accepted there
};

}  // namespace nibble::runtime
