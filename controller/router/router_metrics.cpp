#include "controller/router/router_metrics.h"

namespace nibble::router {

RouterMetrics::RouterMetrics(metrics::Registry& r)
    : requests(r.counter("nibble_controller_router_requests_total",
                         "Requests answered by the router, by model and HTTP status.",
                         {"model_name", "code"})),
      duration(r.histogram("nibble_controller_router_request_duration_seconds",
                           "Time from the request's arrival to its last response byte.",
                           {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
                           {"model_name"})),
      inflight(r.gauge("nibble_controller_router_inflight_requests",
                       "Requests forwarded or held for a replica, by model.", {"model_name"})),
      retries(r.counter("nibble_controller_router_retries_total",
                        "Requests retried on another replica after one failed before the first "
                        "response byte.",
                        {"model_name"})),
      replica_failures(r.counter("nibble_controller_router_replica_failures_total",
                                 "Requests failed with 502 because their replica ended the "
                                 "connection while serving them (not retried elsewhere).",
                                 {"model_name"})) {}

}  // namespace nibble::router
