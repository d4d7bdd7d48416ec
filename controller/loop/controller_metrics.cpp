#include "controller/loop/controller_metrics.h"

namespace nibble::controller {

ControllerMetrics::ControllerMetrics(metrics::Registry& r)
    : passes(r.counter("nibble_controller_reconcile_passes_total",
                       "Reconcile passes over all recipes.")
                 .labels({})),
      pass_duration(r.histogram("nibble_controller_reconcile_pass_duration_seconds",
                                "Wall time of one reconcile pass over all recipes.",
                                {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5})
                        .labels({})),
      reconciles(r.counter("nibble_controller_reconciles_total",
                           "Reconciles of one recipe (one per recipe per pass).", {"recipe"})),
      reconcile_errors(r.counter("nibble_controller_reconcile_errors_total",
                                 "Reconciles of one recipe that failed with an error.",
                                 {"recipe"})),
      desired_replicas(r.gauge("nibble_controller_desired_replicas",
                               "Replicas the autoscaler wants for the recipe.", {"recipe"})),
      ready_replicas(r.gauge("nibble_controller_ready_replicas",
                             "Replicas of the recipe that answer /health.", {"recipe"})),
      replica_restarts(r.counter(
          "nibble_controller_replica_restarts_total",
          "Engine replicas that exited without being asked to; each is restarted after a back-off.",
          {"recipe"})),
      autoscaler_decisions(
          r.counter("nibble_controller_autoscaler_decisions_total",
                    "Autoscaler decisions, one per recipe per pass: up, down or keep.",
                    {"recipe", "direction"})),
      recipe_phase(r.gauge("nibble_controller_recipe_phase",
                           "1 for the recipe's current phase, 0 for the others it had.",
                           {"recipe", "phase"})) {}

}  // namespace nibble::controller
