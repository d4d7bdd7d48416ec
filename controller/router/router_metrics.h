#pragma once
// The router's Prometheus metrics (nibble_controller_router_*), registered in the registry the
// router serves on its own /metrics.
#include <string>

#include "metrics/registry.h"

namespace nibble::router {

struct RouterMetrics {
  explicit RouterMetrics(metrics::Registry& registry);

  metrics::CounterFamily& requests;          // model_name, code
  metrics::HistogramFamily& duration;        // model_name, seconds to the last byte
  metrics::GaugeFamily& inflight;            // model_name, forwarded + held
  metrics::CounterFamily& retries;           // model_name, a replica failed before the first byte
  metrics::CounterFamily& replica_failures;  // model_name, a replica died serving a request
};

}  // namespace nibble::router
