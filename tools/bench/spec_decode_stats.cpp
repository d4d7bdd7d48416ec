#include "tools/bench/spec_decode_stats.h"

#include <cstdio>

#include "tools/bench/server_metrics.h"

namespace nibble::bench {
namespace {

constexpr const char* kDrafts = "nibble_spec_decode_num_drafts_total";
constexpr const char* kDraftTokens = "nibble_spec_decode_num_draft_tokens_total";
constexpr const char* kAccepted = "nibble_spec_decode_num_accepted_tokens_total";
constexpr const char* kPerPosition = "nibble_spec_decode_num_accepted_tokens_per_pos_total";

}  // namespace

std::optional<SpecDecodeStats> read_spec_decode_stats(const std::string& text) {
  if (!has_series(text, kDrafts)) return std::nullopt;
  SpecDecodeStats s;
  s.drafts = series_sum(text, kDrafts);
  s.draft_tokens = series_sum(text, kDraftTokens);
  s.accepted_tokens = series_sum(text, kAccepted);
  for_each_sample(text, kPerPosition, [&s](const std::string& line, double v) {
    const auto at = line.find("position=\"");
    if (at == std::string::npos) return;
    const std::size_t p = std::stoul(line.substr(at + 10));
    if (s.accepted_per_position.size() <= p) s.accepted_per_position.resize(p + 1, 0);
    s.accepted_per_position[p] += v;
  });
  return s;
}

std::optional<SpecDecodeStats> spec_decode_between(const std::string& before,
                                                   const std::string& after) {
  const auto a = read_spec_decode_stats(after);
  if (!a) return std::nullopt;
  // A server that exports the counters but had none before the run: they started at zero.
  const SpecDecodeStats b = read_spec_decode_stats(before).value_or(SpecDecodeStats{});
  SpecDecodeStats d = *a;
  d.drafts -= b.drafts;
  d.draft_tokens -= b.draft_tokens;
  d.accepted_tokens -= b.accepted_tokens;
  for (std::size_t p = 0; p < d.accepted_per_position.size() && p < b.accepted_per_position.size();
       ++p)
    d.accepted_per_position[p] -= b.accepted_per_position[p];
  return d;
}

std::string format_spec_decode(const SpecDecodeStats& s) {
  char line[160];
  std::string out = "---------------Speculative Decoding---------------\n";
  auto row = [&](const char* label, double v, int digits) {
    std::snprintf(line, sizeof line, "%-40s %16.*f\n", label, digits, v);
    out += line;
  };
  row("Acceptance rate (%):", 100 * s.acceptance_rate(), 2);
  row("Acceptance length:", s.acceptance_length(), 2);
  row("Drafts:", s.drafts, 0);
  row("Draft tokens:", s.draft_tokens, 0);
  row("Accepted tokens:", s.accepted_tokens, 0);
  std::string per_position;
  for (double a : s.accepted_per_position) {
    std::snprintf(line, sizeof line, "%s%.1f", per_position.empty() ? "" : ", ",
                  s.drafts > 0 ? 100 * a / s.drafts : 0.0);
    per_position += line;
  }
  std::snprintf(line, sizeof line, "%-40s %s\n",
                "Per-position acceptance (%):", per_position.c_str());
  out += line;
  return out;
}

nlohmann::json spec_decode_json(const SpecDecodeStats& s) {
  nlohmann::json per_position = nlohmann::json::array();
  for (double a : s.accepted_per_position) per_position.push_back(s.drafts > 0 ? a / s.drafts : 0);
  return {{"drafts", s.drafts},
          {"draft_tokens", s.draft_tokens},
          {"accepted_tokens", s.accepted_tokens},
          {"acceptance_rate", s.acceptance_rate()},
          {"acceptance_length", s.acceptance_length()},
          {"acceptance_per_position", per_position}};
}

}  // namespace nibble::bench
