#include "tests/metrics/sample_registry.h"

namespace nibble::metrics::testing {

void fill_sample_registry(Registry& registry) {
  auto& requests = registry.counter("nibble_test_requests_total", "Requests by outcome.",
                                    {"model_name", "finished_reason"});
  requests.labels({"tiny", "stop"}).inc(7);
  requests.labels({"tiny", "length"}).inc(2);
  requests.labels({"quote\"back\\slash\nnewline", "stop"}).inc(1);
  registry
      .gauge("nibble_test_kv_cache_usage_ratio", "KV cache blocks in use, 0 to 1.", {"model_name"})
      .labels({"tiny"})
      .set(0.25);
  registry.gauge("nibble_test_build_info", "Build information; value is always 1.", {"version"})
      .labels({"0.1.0"})
      .set(1);
  auto& ttft = registry.histogram("nibble_test_time_to_first_token_seconds",
                                  "Time to first token.\nSecond line with \\ backslash.",
                                  {0.01, 0.1, 1, 10}, {"model_name"});
  for (double v : {0.005, 0.05, 0.5, 0.5, 5.0, 50.0}) ttft.labels({"tiny"}).observe(v);
}

}  // namespace nibble::metrics::testing
