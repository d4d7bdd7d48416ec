#include "engine/runtime/spec_decode_metrics.h"

namespace nibble::runtime {

SpecDecodeMetrics::SpecDecodeMetrics(metrics::Registry& r, const std::string& model_name,
                                     int num_speculative_tokens)
    : num_drafts(r.counter("nibble_spec_decode_num_drafts_total",
                           "Drafts verified: one sequence's proposed tokens in one step.",
                           {"model_name"})
                     .labels({model_name})),
      num_draft_tokens(r.counter("nibble_spec_decode_num_draft_tokens_total",
                                 "Draft tokens proposed and verified.", {"model_name"})
                           .labels({model_name})),
      num_accepted_tokens(r.counter("nibble_spec_decode_num_accepted_tokens_total",
                                    "Draft tokens accepted by verification.", {"model_name"})
                              .labels({model_name})) {
  metrics::CounterFamily& per_pos =
      r.counter("nibble_spec_decode_num_accepted_tokens_per_pos_total",
                "Draft tokens accepted at each position of their draft (0: the first).",
                {"model_name", "position"});
  for (int p = 0; p < num_speculative_tokens; ++p)
    accepted_per_pos.push_back(&per_pos.labels({model_name, std::to_string(p)}));
}

void SpecDecodeMetrics::count(int num_drafted, int num_accepted) {
  num_drafts.inc();
  num_draft_tokens.inc(double(num_drafted));
  num_accepted_tokens.inc(double(num_accepted));
  for (int p = 0; p < num_accepted && p < int(accepted_per_pos.size()); ++p)
    accepted_per_pos[std::size_t(p)]->inc();
}

}  // namespace nibble::runtime
