#include "controller/router/proxy_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "controller/router/request_scope.h"
#include "controller/router/response_relay.h"
#include "controller/router/router_error.h"
#include "controller/router/upstream_call.h"
#include "http/client_connection.h"

namespace nibble::router {

namespace {

using namespace std::chrono_literals;

// Retry-After for a model with no replica that can answer now, and for one whose replicas
// all refused (draining or full: they come back within seconds).
constexpr int kNoReplicaRetryAfterS = 5;
constexpr int kRefusedRetryAfterS = 1;
// A hold waits in slices so that stop() ends it promptly.
constexpr auto kHoldSlice = 250ms;
// While every replica fails to connect, the replicas are tried again this often.
constexpr auto kFailoverSlice = 100ms;
// A request waiting for its replica's answer looks at its client this often, so that a client
// that left cancels the upstream call and the engine aborts the generation.
constexpr auto kClientCheckSlice = 100ms;

// The models /v1/models lists: those a request is answered for, now or after a hold.
std::vector<RouteEntry> servable(const RouteTable& routes) {
  std::vector<RouteEntry> out;
  for (RouteEntry& e : routes.entries())
    if (e.can_serve()) out.push_back(std::move(e));
  return out;
}

std::string served_names(const RouteTable& routes) {
  std::vector<std::string> names;
  for (const RouteEntry& e : servable(routes)) names.push_back(e.served_model_name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

// What a request keeps alive until its last byte: its accounting and its replica's count.
struct ForwardedRequest {
  ForwardedRequest(InflightTracker& tracker, RouterMetrics& metrics, const RouteEntry& entry)
      : scope(tracker, metrics, entry.recipe, entry.served_model_name) {}
  RequestScope scope;
  std::optional<ReplicaLease> lease;
};

}  // namespace

ProxyHandler::ProxyHandler(RouteTable& routes, InflightTracker& tracker, RouterMetrics& metrics,
                           const RouterConfig& config, CallRegistry& calls)
    : routes_(routes), tracker_(tracker), metrics_(metrics), config_(config), calls_(calls) {}

void ProxyHandler::set_demand_callback(DemandCallback callback) {
  std::lock_guard lock(callback_mutex_);
  demand_callback_ = std::move(callback);
}

void ProxyHandler::set_failure_callback(FailureCallback callback) {
  std::lock_guard lock(callback_mutex_);
  failure_callback_ = std::move(callback);
}

void ProxyHandler::notify_failure(const ReplicaFailure& failure) {
  FailureCallback callback;
  {
    std::lock_guard lock(callback_mutex_);
    callback = failure_callback_;
  }
  if (!callback) return;
  try {
    callback(failure);
  } catch (const std::exception& e) {
    spdlog::error("router: failure callback for recipe '{}' failed: {}", failure.recipe, e.what());
  }
}

void ProxyHandler::notify_demand(const std::string& recipe) {
  DemandCallback callback;
  {
    std::lock_guard lock(callback_mutex_);
    callback = demand_callback_;
  }
  if (!callback) return;
  try {
    callback(recipe);
  } catch (const std::exception& e) {  // the controller's problem must not fail the request
    spdlog::error("router: demand callback for recipe '{}' failed: {}", recipe, e.what());
  }
}

std::optional<RouteEntry> ProxyHandler::hold(const RouteEntry& entry) {
  tracker_.begin_hold(entry.recipe);
  spdlog::info("router: holding a request for model '{}' until a replica of recipe '{}' is ready",
               entry.served_model_name, entry.recipe);
  notify_demand(entry.recipe);
  const auto deadline = std::chrono::steady_clock::now() + config_.hold_timeout;
  std::optional<RouteEntry> ready;
  while (!stopping_ && std::chrono::steady_clock::now() < deadline) {
    const auto slice_end = std::min(deadline, std::chrono::steady_clock::now() + kHoldSlice);
    ready = routes_.wait_for_ready(entry.recipe, slice_end);
    if (ready || !routes_.find_by_recipe(entry.recipe) || http::client_disconnected()) break;
  }
  tracker_.end_hold(entry.recipe);
  return ready;
}

void ProxyHandler::wait_for_failover(const std::string& recipe,
                                     std::chrono::steady_clock::time_point deadline) {
  tracker_.begin_hold(recipe);
  notify_demand(recipe);
  const auto slice_end = std::min(deadline, std::chrono::steady_clock::now() + kFailoverSlice);
  while (!stopping_ && std::chrono::steady_clock::now() < slice_end) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        10ms, slice_end - std::chrono::steady_clock::now()));
  }
  tracker_.end_hold(recipe);
}

void ProxyHandler::handle(const httplib::Request& req, httplib::Response& res) {
  const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    metrics_.requests.labels({"", "400"}).inc();
    send_error(res, 400, "invalid_request_error",
               "the request body is not a JSON object (" + req.path + " expects one)");
    return;
  }
  const auto model_field = body.find("model");
  std::optional<RouteEntry> entry;
  std::string missing = "\"model\" must be a string naming one";
  if (model_field == body.end()) {
    // As an engine does with its one model: a request without "model" goes to the only model
    // served (the body is forwarded as it is, and the engine fills it in).
    std::vector<RouteEntry> models = servable(routes_);
    if (models.size() == 1) entry = std::move(models.front());
    missing = models.empty() ? "the request has no \"model\" and no model can serve now; name one"
                             : "the request has no \"model\" and the router serves more than "
                               "one; name one";
  }
  if (!entry && (model_field == body.end() || !model_field->is_string())) {
    metrics_.requests.labels({"", "400"}).inc();
    send_error(res, 400, "invalid_request_error",
               missing + " of the served models: " + served_names(routes_), "", "model");
    return;
  }
  const std::string model = entry ? entry->served_model_name : model_field->get<std::string>();
  if (!entry) entry = routes_.find_by_model(model);
  if (!entry) {
    // Unknown names are counted without their name, so clients cannot grow the label set.
    metrics_.requests.labels({"", "404"}).inc();
    send_error(res, 404, "invalid_request_error",
               "The model '" + model + "' does not exist; served models: " + served_names(routes_),
               "model_not_found", "model");
    return;
  }

  auto forwarded = std::make_shared<ForwardedRequest>(tracker_, metrics_, *entry);
  RequestScope& scope = forwarded->scope;
  auto fail = [&](int status, const std::string& type, const std::string& message,
                  int retry_after_s = 0) {
    scope.set_status(status);
    if (retry_after_s > 0) {
      send_unavailable(res, message, retry_after_s);
      res.status = status;
    } else {
      send_error(res, status, type, message);
    }
  };

  // No replica can come (the controller says why): fail now rather than hold.
  auto unavailable = [&](const RouteEntry& e) {
    if (!e.ready.empty() || e.unavailable.empty()) return false;
    fail(503, "service_unavailable", "model '" + model + "' cannot serve: " + e.unavailable,
         kNoReplicaRetryAfterS);
    return true;
  };
  if (entry->ready.empty()) {
    if (unavailable(*entry)) return;
    if (!entry->scale_from_zero && !entry->starting) {
      fail(503, "service_unavailable", "model '" + model + "' has no ready replica",
           kNoReplicaRetryAfterS);
      return;
    }
    entry = hold(*entry);
    if (!entry && stopping_) {
      fail(503, "service_unavailable", "the router is stopping", kRefusedRetryAfterS);
      return;
    }
    if (!entry) {
      fail(503, "service_unavailable",
           "model '" + model + "' has no ready replica after waiting " +
               std::to_string(config_.hold_timeout.count()) + " s for one to start",
           kNoReplicaRetryAfterS);
      return;
    }
    if (unavailable(*entry)) return;  // its replicas failed while the request was held
  }

  std::set<std::string> tried;
  bool last_refused = false;  // the last replica answered 503 rather than failing to connect
  std::string last_error;
  const int max_attempts = std::max(1, config_.max_attempts);
  int attempts_this_round = 0;
  // Replicas that failed to connect (an engine that died) are replaced by the controller
  // within a resync or two: until then the request waits rather than fail with a 502.
  const auto failover_deadline = std::chrono::steady_clock::now() + config_.failover_timeout;
  for (int attempt = 0; !stopping_; ++attempt) {
    if (attempt > 0) {
      // Replicas may have come or gone while the last one failed.
      if (auto fresh = routes_.find_by_recipe(entry->recipe)) entry = std::move(fresh);
    }
    std::optional<ReplicaEndpoint> replica;
    if (attempts_this_round < max_attempts) replica = tracker_.acquire(*entry, tried);
    if (!replica) {
      if (last_refused || last_error.empty() ||
          std::chrono::steady_clock::now() >= failover_deadline ||
          !routes_.find_by_recipe(entry->recipe)) {
        break;
      }
      wait_for_failover(entry->recipe, failover_deadline);
      tried.clear();  // a replica that failed may be back (restarted on its port)
      attempts_this_round = 0;
      continue;
    }
    if (attempt > 0) metrics_.retries.labels({model}).inc();
    ++attempts_this_round;
    tried.insert(replica->id);
    ReplicaLease lease(tracker_, entry->recipe, replica->id);
    auto call = UpstreamCall::start(*replica, req, config_.read_timeout);
    calls_.add(call);
    UpstreamCall::Head head = call->wait_head(kClientCheckSlice);
    while (head == UpstreamCall::Head::kWaiting) {
      if (http::client_disconnected()) {
        // Closes the upstream connection: the engine aborts the request as if its own client
        // had left. Nobody reads the answer; 499 is what the metrics count.
        call->cancel();
        scope.set_status(499);
        spdlog::info("router: the client of a request for model '{}' left; cancelled it on '{}'",
                     model, replica->id);
        http::end_connection_now();
        return;
      }
      head = call->wait_head(kClientCheckSlice);
    }
    switch (head) {
      case UpstreamCall::Head::kReceived:
        scope.set_status(call->status());
        forwarded->lease.emplace(std::move(lease));
        relay_response(
            call, forwarded,
            [weak = std::weak_ptr<ForwardedRequest>(forwarded)] {
              if (auto f = weak.lock()) f->lease.reset();
            },
            res);
        return;
      case UpstreamCall::Head::kTimedOut:
        fail(504, "timeout",
             "replica '" + replica->id + "' of model '" + model + "' sent no answer within " +
                 std::to_string(config_.read_timeout.count()) + " s");
        return;
      case UpstreamCall::Head::kCancelled:
        fail(503, "service_unavailable", "the router is stopping", kRefusedRetryAfterS);
        return;
      case UpstreamCall::Head::kDied: {
        // Never on to the next replica: if this request is what killed the engine, it would
        // kill every replica in turn.
        const std::string message = "replica '" + replica->id + "' of model '" + model +
                                    "' ended the connection while serving this request (it may "
                                    "have crashed); the request was not retried on another "
                                    "replica";
        spdlog::warn("router: {}", message);
        metrics_.replica_failures.labels({model}).inc();
        notify_failure({entry->recipe, model, replica->id, message});
        fail(502, "bad_gateway", message);
        return;
      }
      case UpstreamCall::Head::kWaiting:
        break;  // not reached: the loop above waits it out
      case UpstreamCall::Head::kRetryable:
        last_error = call->error();
        last_refused = call->refused();
        spdlog::warn("router: replica '{}' of model '{}' failed before answering: {}", replica->id,
                     model, last_error);
        break;
    }
  }
  if (stopping_) {
    fail(503, "service_unavailable", "the router is stopping", kRefusedRetryAfterS);
  } else if (last_refused) {
    fail(503, "service_unavailable",
         "every replica of model '" + model + "' tried (" + std::to_string(tried.size()) +
             ") is draining or full",
         kRefusedRetryAfterS);
  } else {
    fail(502, "bad_gateway",
         "no replica of model '" + model + "' could be reached (" + std::to_string(tried.size()) +
             " tried; last error: " + last_error + ")");
  }
}

}  // namespace nibble::router
