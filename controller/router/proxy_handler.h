#pragma once
// The router's handler for every model request (chat/completions, completions, embeddings,
// tokenize, detokenize): read "model" from the JSON body (absent: the one model served, as an
// engine does; 400 naming the served models when there are several), find its recipe, hold
// the request while a scaled-to-zero or starting recipe gets a ready replica, send it to the
// least loaded replica, retry on another while nothing has reached the client yet, then relay
// the answer. A recipe whose replicas cannot come (RouteEntry::unavailable: weights that
// cannot be fetched, replicas crash-looping) fails its requests at once, held ones included,
// with 503 and the controller's reason.
// When every ready replica fails to connect (an engine died and the controller has not yet
// replaced it), the request waits up to RouterConfig::failover_timeout for a replica that
// answers instead of failing with 502.
// A replica that takes the whole request and then closes the connection without a status (it
// died serving it) fails the request with one 502 and is reported (set_failure_callback): it is
// never retried on another replica, since the request may be what killed it.
// A client that leaves while the replica has not answered yet (a long non-streamed completion)
// is noticed within 100 ms and the upstream call cancelled, so the engine aborts the request;
// once bytes flow, at the next write. A held request whose client left stops being held.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "controller/router/call_registry.h"
#include "controller/router/inflight_tracker.h"
#include "controller/router/route_table.h"
#include "controller/router/router_config.h"
#include "controller/router/router_metrics.h"

namespace nibble::router {

// A replica that died while serving a request (see above), for the recipe's events.
struct ReplicaFailure {
  std::string recipe;
  std::string model;
  std::string replica_id;
  std::string message;
};

class ProxyHandler {
 public:
  using DemandCallback = std::function<void(const std::string& recipe)>;
  using FailureCallback = std::function<void(const ReplicaFailure&)>;

  ProxyHandler(RouteTable& routes, InflightTracker& tracker, RouterMetrics& metrics,
               const RouterConfig& config, CallRegistry& calls);

  void handle(const httplib::Request& req, httplib::Response& res);

  void set_demand_callback(DemandCallback callback);
  void set_failure_callback(FailureCallback callback);
  // Ends holds at once (503) and refuses new ones; for Router::stop().
  void stop() { stopping_ = true; }

 private:
  // The recipe's entry once it has a ready replica or cannot get one (unavailable), or nullopt
  // at the hold timeout, when the recipe is removed, or when the router stops.
  std::optional<RouteEntry> hold(const RouteEntry& entry);
  void notify_demand(const std::string& recipe);
  void notify_failure(const ReplicaFailure& failure);
  // Every replica tried failed to connect or reset before answering: wait a short slice
  // (counted as held, the controller woken) before trying the ready replicas again.
  void wait_for_failover(const std::string& recipe, std::chrono::steady_clock::time_point deadline);

  RouteTable& routes_;
  InflightTracker& tracker_;
  RouterMetrics& metrics_;
  const RouterConfig& config_;
  CallRegistry& calls_;
  std::atomic<bool> stopping_{false};
  std::mutex callback_mutex_;
  DemandCallback demand_callback_;
  FailureCallback failure_callback_;
};

}  // namespace nibble::router
