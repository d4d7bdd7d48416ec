#pragma once
// The router's handler for every model request (chat/completions, completions, embeddings,
// tokenize, detokenize): read "model" from the JSON body, find its recipe, hold the request
// while a scaled-to-zero or starting recipe gets a ready replica, send it to the least loaded
// replica, retry on another while nothing has reached the client yet, then relay the answer.
// When every ready replica fails to connect (an engine died and the controller has not yet
// replaced it), the request waits up to RouterConfig::failover_timeout for a replica that
// answers instead of failing with 502.
// A client that leaves while the replica has not answered yet (a long non-streamed completion)
// is noticed when the answer is written; once bytes flow, at the next write. A held request
// whose client left is still forwarded when a replica comes (httplib gives no way to watch the
// client's socket meanwhile).
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

class ProxyHandler {
 public:
  using DemandCallback = std::function<void(const std::string& recipe)>;

  ProxyHandler(RouteTable& routes, InflightTracker& tracker, RouterMetrics& metrics,
               const RouterConfig& config, CallRegistry& calls);

  void handle(const httplib::Request& req, httplib::Response& res);

  void set_demand_callback(DemandCallback callback);
  // Ends holds at once (503) and refuses new ones; for Router::stop().
  void stop() { stopping_ = true; }

 private:
  // The recipe's entry once it has a ready replica, or nullopt at the hold timeout, when the
  // recipe is removed, or when the router stops.
  std::optional<RouteEntry> hold(const RouteEntry& entry);
  void notify_demand(const std::string& recipe);
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
};

}  // namespace nibble::router
