#pragma once
// One OpenAI-compatible endpoint in front of every recipe's ready replicas (docs/controller.md):
//   GET  /v1/models   every served name in the RouteTable that can serve (a ready replica, or
//                     one coming), with the engine's root and max_model_len (RouteEntry::card)
//   GET  /health      200 "OK" from the router itself
//   GET  /metrics     the registry (nibble_controller_router_* among it)
// With API keys every path but /health (and /metrics unless metrics_require_key) needs one;
// timeouts, guards and limits are the HTTP layer's (http/server.h).
//   POST /v1/chat/completions, /v1/completions, /v1/embeddings, /tokenize, /detokenize
//                     to the recipe named by "model" (see proxy_handler.h)
// The controller publishes replicas into the RouteTable and reads load back through inflight(),
// held() and last_request() to scale; a held request calls the demand callback so that the
// controller acts at once.
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "controller/router/call_registry.h"
#include "controller/router/inflight_tracker.h"
#include "controller/router/proxy_handler.h"
#include "controller/router/route_table.h"
#include "controller/router/router_config.h"
#include "controller/router/router_metrics.h"
#include "http/server.h"
#include "metrics/registry.h"

namespace nibble::router {

class Router {
 public:
  Router(RouteTable& routes, metrics::Registry& registry, RouterConfig config);
  ~Router();  // stops
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Binds (false + spdlog error when it cannot) and serves on a background thread.
  bool start();
  int port() const { return port_; }  // the bound port
  std::uint64_t yielded_connections() const { return http_.yielded_connections(); }
  // Ends held requests and upstream calls in progress, then stops serving. Idempotent.
  void stop();

  // For the autoscaler, per recipe (RouteEntry::recipe):
  int inflight(const std::string& recipe) const;  // forwarded + held, right now
  int held(const std::string& recipe) const;      // held waiting for a ready replica
  // When the last request arrived or was answered; zero (the epoch) if never.
  std::chrono::steady_clock::time_point last_request(const std::string& recipe) const;
  // Called (from the HTTP thread) when a request starts being held for a recipe with no ready
  // replica, so the controller runs a pass at once instead of waiting for its next tick.
  void set_demand_callback(std::function<void(const std::string& recipe)> callback);
  // Called (from the HTTP thread) when a replica died while serving a request, so that the
  // controller records it among the recipe's events.
  void set_failure_callback(std::function<void(const ReplicaFailure&)> callback);

  // Requests this router has in flight on one replica (tests, debugging).
  int replica_inflight(const std::string& recipe, const std::string& replica_id) const;

 private:
  void route();

  RouteTable& routes_;
  metrics::Registry& registry_;
  RouterConfig config_;
  RouterMetrics metrics_;
  InflightTracker tracker_;
  CallRegistry calls_;
  ProxyHandler proxy_;
  http::Server http_;
  int port_ = -1;
  const long long created_;  // "created" of every /v1/models entry
};

}  // namespace nibble::router
