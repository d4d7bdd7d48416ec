#include "engine/server/tool_call_metrics.h"

namespace nibble::server {

ToolCallMetrics::ToolCallMetrics(metrics::Registry& registry, std::string model_name)
    : model_name_(std::move(model_name)),
      requests_(registry.counter("nibble_tool_call_requests_total",
                                 "Chat requests that offered tools, by tool_choice.",
                                 {"model_name", "tool_choice"})),
      calls_(registry.counter(
          "nibble_tool_calls_total",
          "Tool calls parsed from generated text (outcome parsed), and tool-call markup that was "
          "malformed and returned as content (outcome malformed).",
          {"model_name", "parser", "outcome"})) {}

void ToolCallMetrics::count_request(const std::string& tool_choice) {
  requests_.labels({model_name_, tool_choice}).inc();
}

void ToolCallMetrics::count_calls(const std::string& parser, int parsed, int malformed) {
  if (parsed > 0) calls_.labels({model_name_, parser, "parsed"}).inc(parsed);
  if (malformed > 0) calls_.labels({model_name_, parser, "malformed"}).inc(malformed);
}

}  // namespace nibble::server
