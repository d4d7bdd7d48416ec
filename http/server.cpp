#include "http/server.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>

#include "http/client_connection.h"
#include "http/cors.h"
#include "http/listen_backlog.h"

namespace nibble::http {

namespace {

bool has_body(const httplib::Request& req) {
  const std::string length = req.get_header_value("Content-Length");
  return (!length.empty() && length.find_first_not_of('0') != std::string::npos) ||
         req.has_header("Transfer-Encoding");
}

}  // namespace

int effective_pending_cap(const ServerConfig& config) {
  if (config.max_pending_connections_per_client > 0)
    return config.max_pending_connections_per_client;
  return std::max(1, config.threads / 4);
}

namespace {

ConnectionPolicy connection_policy(const ServerConfig& config) {
  ConnectionPolicy p;
  p.name = config.name;
  p.workers = std::max(1, config.threads);
  p.max_waiting_per_peer = effective_pending_cap(config);
  p.keep_alive_max_requests = std::max(1, config.keep_alive_max_requests);
  p.timeouts = {config.read_timeout, config.write_timeout, config.head_timeout, config.body_timeout,
                config.keep_alive_timeout};
  p.head_limits = config.head_limits;
  return p;
}

}  // namespace

Server::Server(ServerConfig config) : config_(std::move(config)) {
  ConnectionPolicy policy = connection_policy(config_);
  policy.write_error = [this](httplib::Response& res, const ApiError& e) { write_error(res, e); };
  http_ = std::make_unique<GatedServer>(std::move(policy));
  install_handlers();
}

Server::~Server() {
  stop();
}

void Server::write_error(httplib::Response& res, const ApiError& error) const {
  if (config_.write_error) {
    config_.write_error(res, error);
  } else {
    send_error(res, error);
  }
}

void Server::install_handlers() {
  http_->set_payload_max_length(config_.max_body_bytes);
  http_->set_read_timeout(config_.read_timeout);
  http_->set_write_timeout(config_.write_timeout);
  http_->set_keep_alive_timeout(config_.keep_alive_timeout.count());
  http_->set_keep_alive_max_count(std::size_t(std::max(1, config_.keep_alive_max_requests)));
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port in use and
  // silently share its connections; bind-or-fail needs plain SO_REUSEADDR.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    mark_request_head_received();
    GuardedRequest guarded{req.method, req.get_header_value("Host"), req.get_header_value("Origin"),
                           req.get_header_value("Content-Type"), has_body(req)};
    const RequestGuardConfig guard{config_.host, config_.write_content_types,
                                   config_.allowed_origins};
    std::optional<ApiError> refusal = check_request(guard, guarded);
    if (!refusal && is_origin_allowed(config_.allowed_origins, guarded.origin)) {
      add_cors_headers(res, guarded.origin);
      if (req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method")) {
        answer_preflight(res, req.get_header_value("Access-Control-Request-Headers"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!refusal && !config_.api_keys.empty() &&
        std::find(config_.open_paths.begin(), config_.open_paths.end(), req.path) ==
            config_.open_paths.end() &&
        !config_.api_keys.authorizes(req.get_header_value("Authorization"))) {
      refusal = unauthorized();
    }
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    if (refusal->status() != 401) {
      spdlog::info("{}: refused {} {} from {}: {}", config_.name, req.method, req.path,
                   req.remote_addr, refusal->what());
    }
    // The body was not read: the connection cannot carry another request.
    res.set_header("Connection", "close");
    write_error(res, *refusal);
    return httplib::Server::HandlerResponse::Handled;
  });

  // httplib calls this after the error handler, before writing any response.
  http_->set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    mark_response_written(res.get_header_value("Connection") == "close");
  });

  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A handler's own answer (a body, or a relayed one with only a Content-Type) stays.
    if (!res.body.empty() || res.has_header("Content-Type")) return;
    // httplib could not parse the head, or the body was not (all) read: the connection cannot
    // carry another request.
    if (!request_head_received() || res.status == 400 || res.status == 413) {
      res.set_header("Connection", "close");
      end_connection_now();
    }
    if (res.status == 400 && request_read_timed_out()) {
      res.status = 408;
      write_error(res,
                  ApiError(408, "invalid_request_error",
                           "the request body was not received within the time limit (" +
                               std::to_string(config_.body_timeout.count()) + " s, or " +
                               std::to_string(config_.read_timeout.count()) + " s of silence)"));
    } else if (res.status == 413) {
      write_error(res, ApiError(413, "invalid_request_error",
                                "the request body is larger than the limit of " +
                                    std::to_string(config_.max_body_bytes) + " bytes"));
    } else if (res.status == 404) {
      write_error(
          res, ApiError(404, "not_found_error", "no such route: " + req.method + " " + req.path));
    } else {
      write_error(res, ApiError(res.status, "invalid_request_error", "request failed"));
    }
  });

  http_->set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("{}: {} {}: {}", config_.name, req.method, req.path, what);
        write_error(res, ApiError(500, "internal_server_error", what));
      });
}

int Server::bind() {
  if (port_ > 0) return port_;
  const int port = config_.port == 0
                       ? http_->bind_to_any_port(config_.host)
                       : (http_->bind_to_port(config_.host, config_.port) ? config_.port : -1);
  if (port < 0) {
    throw std::runtime_error(config_.name + ": cannot listen on " + config_.host + ":" +
                             std::to_string(config_.port) +
                             " (the address is in use, not local, or needs privileges)");
  }
  port_ = port;
  if (!raise_listen_backlog(port, config_.listen_backlog)) {
    spdlog::warn(
        "{}: could not raise the listen backlog on port {}; bursts of connections may "
        "be reset",
        config_.name, port);
  }
  return port;
}

void Server::listen() {
  bind();
  http_->listen_after_bind();
}

void Server::start() {
  if (thread_.joinable()) return;
  bind();
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() only stops a server that is running: wait for it, so start-then-stop cannot hang.
  for (int i = 0; i < 500 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Server::stop() {
  http_->stop_serving();
  if (thread_.joinable()) thread_.join();
}

}  // namespace nibble::http
