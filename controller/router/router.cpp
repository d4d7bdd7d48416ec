#include "controller/router/router.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "controller/router/router_error.h"
#include "engine/server/listen_backlog.h"
#include "metrics/exposition.h"

namespace nibble::router {

namespace {

// How long the router waits for a client to send its request.
constexpr int kClientReadTimeoutS = 60;

}  // namespace

Router::Router(RouteTable& routes, metrics::Registry& registry, RouterConfig config)
    : routes_(routes),
      registry_(registry),
      config_(std::move(config)),
      metrics_(registry),
      proxy_(routes_, tracker_, metrics_, config_, calls_),
      created_(std::time(nullptr)) {
  route();
}

Router::~Router() {
  stop();
}

bool Router::start() {
  if (serve_thread_.joinable()) return true;
  const int port = config_.port == 0
                       ? http_.bind_to_any_port(config_.host)
                       : (http_.bind_to_port(config_.host, config_.port) ? config_.port : -1);
  if (port < 0) {
    spdlog::error("router: cannot listen on {}:{} (address in use or not permitted)", config_.host,
                  config_.port);
    return false;
  }
  port_ = port;
  if (!server::raise_listen_backlog(port, SOMAXCONN)) {
    spdlog::warn("router: could not raise the listen backlog on port {}", port);
  }
  serve_thread_ = std::thread([this] { http_.listen_after_bind(); });
  // stop() only stops a server that is running: wait for it, so start-then-stop cannot hang.
  for (int i = 0; i < 500 && !http_.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  spdlog::info("router: serving the OpenAI API on {}:{}", config_.host, port_);
  return true;
}

void Router::stop() {
  proxy_.stop();
  calls_.cancel_all();
  http_.stop();
  if (serve_thread_.joinable()) serve_thread_.join();
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

int Router::replica_inflight(const std::string& recipe, const std::string& replica_id) const {
  return tracker_.replica_inflight(recipe, replica_id);
}

void Router::route() {
  const int threads = config_.threads;
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(std::size_t(threads)); };
  http_.set_payload_max_length(config_.max_body_bytes);
  http_.set_read_timeout(kClientReadTimeoutS, 0);

  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A replica's own error answer (relayed through a content provider, so no body here but a
    // Content-Type) passes through untouched.
    if (!res.body.empty() || res.has_header("Content-Type")) return;
    if (res.status == 413) {
      send_error(res, 413, "invalid_request_error",
                 "the request body is larger than the limit of " +
                     std::to_string(config_.max_body_bytes) + " bytes");
    } else if (res.status == 404) {
      send_error(res, 404, "not_found_error", "no such route: " + req.method + " " + req.path);
    } else {
      send_error(res, res.status, "invalid_request_error", "request failed");
    }
  });
  http_.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("router: {} {}: {}", req.method, req.path, what);
        send_error(res, 500, "internal_server_error", what);
      });

  http_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("OK", "text/plain");
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.render(), metrics::kExpositionContentType);
  });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json data = nlohmann::json::array();
    for (const RouteEntry& entry : routes_.entries()) {
      data.push_back({{"id", entry.served_model_name},
                      {"object", "model"},
                      {"created", created_},
                      {"owned_by", "nibble"}});
    }
    res.set_content(nlohmann::json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });
  for (const char* path :
       {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize"}) {
    http_.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      proxy_.handle(req, res);
    });
  }
}

}  // namespace nibble::router
