#pragma once
// The controller's own Prometheus metrics (nibble_controller_*): passes, errors, pass duration,
// desired and ready replicas and autoscaler decisions per recipe. The router adds its request
// metrics to the same registry (controller/router/router_metrics.h).
#include <string>

#include "metrics/registry.h"

namespace nibble::controller {

struct ControllerMetrics {
  explicit ControllerMetrics(metrics::Registry& registry);

  metrics::Counter& passes;                      // reconcile passes over all recipes
  metrics::Histogram& pass_duration;             // seconds per pass
  metrics::CounterFamily& reconciles;            // recipe
  metrics::CounterFamily& reconcile_errors;      // recipe
  metrics::GaugeFamily& desired_replicas;        // recipe
  metrics::GaugeFamily& ready_replicas;          // recipe
  metrics::CounterFamily& replica_restarts;      // recipe: engines that exited unasked (restarted)
  metrics::CounterFamily& autoscaler_decisions;  // recipe, direction = up | down | keep
  metrics::GaugeFamily& recipe_phase;            // recipe, phase: 1 for the current phase
};

}  // namespace nibble::controller
