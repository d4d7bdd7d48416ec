#pragma once
// Speculative decoding as the server counted it during a run (the nibble_spec_decode_* counters,
// docs/metrics.md), reported as vllm bench serve reports it: acceptance rate (accepted / drafted
// tokens), acceptance length (1 + accepted / drafts: tokens one verify step emits per sequence)
// and the acceptance rate at each draft position.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace nibble::bench {

struct SpecDecodeStats {
  double drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  std::vector<double> accepted_per_position;  // [position]

  double acceptance_rate() const { return draft_tokens > 0 ? accepted_tokens / draft_tokens : 0; }
  double acceptance_length() const { return drafts > 0 ? 1 + accepted_tokens / drafts : 1; }
};

// The counters in one /metrics text, summed over models; nullopt when the server exports none
// (no --speculative-config, or not a nibble server).
std::optional<SpecDecodeStats> read_spec_decode_stats(const std::string& metrics_text);

// What the server counted between two scrapes; nullopt unless both have the counters.
std::optional<SpecDecodeStats> spec_decode_between(const std::string& before,
                                                   const std::string& after);

std::string format_spec_decode(const SpecDecodeStats& s);
nlohmann::json spec_decode_json(const SpecDecodeStats& s);

}  // namespace nibble::bench
