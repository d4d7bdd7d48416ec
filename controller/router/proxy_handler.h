#pragma once
// The router's handler for every model request (chat/completions, completions, embeddings,
// tokenize, detokenize): read "model" from the JSON body, find its recipe, hold the request
// while a scaled-to-zero or starting recipe gets a ready replica, send it to the least loaded
// replica, retry on another while nothing has reached the client yet, then relay the answer.
// A client that leaves while the replica has not answered yet (a long non-streamed completion)
// is noticed when the answer is written; once bytes flow, at the next write. A held request
// whose client left is still forwarded when a replica comes (httplib gives no way to watch the
// client's socket meanwhile).
#include <httplib.h>

#include <atomic>
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
