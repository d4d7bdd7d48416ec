#pragma once
// The load an engine reports on its own /metrics page, for the autoscaler: requests running,
// waiting, and KV cache usage. Parsing is separate from fetching so it is tested on text.
#include <optional>
#include <string>

namespace nibble::controller {

struct EngineLoad {
  double running = 0;         // nibble_requests_running, summed over label sets
  double waiting = 0;         // nibble_requests_waiting
  double kv_cache_usage = 0;  // nibble_kv_cache_usage_ratio (max over label sets)
};

// Reads the three gauges from a Prometheus text exposition page; absent series count as 0.
// Returns nullopt when the page has none of them (not an engine's page).
std::optional<EngineLoad> parse_engine_load(const std::string& exposition);

// GET http://host:port/metrics with a short timeout; nullopt when it fails. `api_key`, when
// set, is sent as a bearer key (an engine's /metrics is open unless --metrics-require-key).
std::optional<EngineLoad> scrape_engine_load(const std::string& host, int port,
                                             const std::string& api_key = "");

}  // namespace nibble::controller
