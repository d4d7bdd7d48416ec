#pragma once
// The engine's Prometheus metrics (docs/metrics.md explains each and its vLLM counterpart).
// Every series carries model_name. Families are registered once; children are cached here so
// that the engine thread updates them without any lookup.
#include <string>

#include "metrics/registry.h"

namespace nibble::runtime {

struct EngineMetrics {
  EngineMetrics(metrics::Registry& registry, const std::string& model_name, int max_model_len);

  metrics::Gauge& requests_running;
  metrics::Gauge& requests_waiting;
  metrics::Gauge& kv_cache_usage_ratio;
  metrics::Counter& prefix_cache_queries;
  metrics::Counter& prefix_cache_hits;
  metrics::Counter& preemptions;
  metrics::Counter& prompt_tokens;
  metrics::Counter& generation_tokens;
  metrics::CounterFamily& requests_by_reason;  // label finished_reason, plus model_name
  metrics::Histogram& time_to_first_token;
  metrics::Histogram& inter_token_latency;
  metrics::Histogram& e2e_request_latency;
  metrics::Histogram& request_queue_time;
  metrics::Histogram& request_prefill_time;
  metrics::Histogram& request_decode_time;
  metrics::Histogram& request_prompt_tokens;
  metrics::Histogram& request_generation_tokens;
  // Time to produce one constrained sequence's token mask for one step (structured outputs).
  metrics::Histogram& structured_mask_time;

  void count_finished(const std::string& reason);
  // Hybrid models only: registers nibble_state_slots_used (recurrent-state slots held by running
  // sequences) and nibble_state_slots (the pool's size), which then stay set.
  void add_state_slots(metrics::Registry& registry, int num_slots);
  metrics::Gauge* state_slots_used = nullptr;  // null until add_state_slots

 private:
  std::string model_name_;
};

}  // namespace nibble::runtime
