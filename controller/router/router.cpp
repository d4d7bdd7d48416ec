#include "controller/router/router.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "http/metrics_endpoint.h"

namespace nibble::router {

namespace {

http::ServerConfig http_config(const RouterConfig& c) {
  http::ServerConfig h;
  h.name = "router";
  h.host = c.host;
  h.port = c.port;
  h.threads = c.threads;
  h.read_timeout = c.client_read_timeout;
  h.max_pending_connections_per_client = c.max_pending_connections_per_client;
  h.max_body_bytes = c.max_body_bytes;
  h.api_keys = c.api_keys;
  h.allowed_origins = c.allowed_origins;
  h.open_paths = {"/health"};
  if (!c.metrics_require_key) h.open_paths.push_back("/metrics");
  return h;
}

}  // namespace

Router::Router(RouteTable& routes, metrics::Registry& registry, RouterConfig config)
    : routes_(routes),
      registry_(registry),
      config_(std::move(config)),
      metrics_(registry),
      proxy_(routes_, tracker_, metrics_, config_, calls_),
      http_(http_config(config_)),
      created_(std::time(nullptr)) {
  route();
}

Router::~Router() {
  stop();
}

bool Router::start() {
  if (http_.running()) return true;
  try {
    port_ = http_.bind();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return false;
  }
  http_.start();
  spdlog::info("router: serving the OpenAI API on {}:{}{}", config_.host, port_,
               config_.api_keys.empty() ? " (no API key required)" : "");
  return true;
}

void Router::stop() {
  proxy_.stop();
  calls_.cancel_all();
  http_.stop();
}

int Router::inflight(const std::string& recipe) const {
  return tracker_.requests(recipe);
}

int Router::held(const std::string& recipe) const {
  return tracker_.held(recipe);
}

std::chrono::steady_clock::time_point Router::last_request(const std::string& recipe) const {
  return tracker_.last_request(recipe);
}

void Router::set_demand_callback(std::function<void(const std::string& recipe)> callback) {
  proxy_.set_demand_callback(std::move(callback));
}

void Router::set_failure_callback(std::function<void(const ReplicaFailure&)> callback) {
  proxy_.set_failure_callback(std::move(callback));
}

int Router::replica_inflight(const std::string& recipe, const std::string& replica_id) const {
  return tracker_.replica_inflight(recipe, replica_id);
}

void Router::route() {
  httplib::Server& routes = http_.routes();
  routes.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("OK", "text/plain");
  });
  http::serve_metrics(routes, registry_);
  routes.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json data = nlohmann::json::array();
    // The engine's entry (root, max_model_len) for each model a request can reach now or
    // after a hold; a model whose replicas cannot come is left out, as it cannot serve.
    for (const RouteEntry& entry : routes_.entries()) {
      if (!entry.can_serve()) continue;
      nlohmann::json model = {
          {"id", entry.served_model_name},
          {"object", "model"},
          {"created", created_},
          {"owned_by", "nibble"},
          {"root", entry.card.root.empty() ? entry.served_model_name : entry.card.root}};
      if (entry.card.max_model_len > 0) model["max_model_len"] = entry.card.max_model_len;
      data.push_back(std::move(model));
    }
    res.set_content(nlohmann::json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });
  for (const char* path :
       {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize"}) {
    routes.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      proxy_.handle(req, res);
    });
  }
}

}  // namespace nibble::router
