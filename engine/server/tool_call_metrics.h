#pragma once
// Tool-call and reasoning counters of the chat endpoint (docs/metrics.md):
//   nibble_tool_call_requests_total{model_name, tool_choice}   chat requests that offered tools
//   nibble_tool_calls_total{model_name, parser, outcome}       per choice: outcome "parsed" counts
//                                                              calls returned, "malformed" markup
//                                                              returned as content
#include <string>

#include "metrics/registry.h"

namespace nibble::server {

class ToolCallMetrics {
 public:
  ToolCallMetrics(metrics::Registry& registry, std::string model_name);

  void count_request(const std::string& tool_choice);
  void count_calls(const std::string& parser, int parsed, int malformed);

 private:
  std::string model_name_;
  metrics::CounterFamily& requests_;
  metrics::CounterFamily& calls_;
};

}  // namespace nibble::server
