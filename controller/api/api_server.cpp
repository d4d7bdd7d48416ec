#include "controller/api/api_server.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "controller/local/log_tail.h"
#include "controller/recipe/recipe_scale.h"
#include "controller/recipe/recipe_set.h"
#include "controller/recipe/relative_model_path.h"
#include "controller/recipe/yaml_documents.h"
#include "http/metrics_endpoint.h"
#include "http/status_reason.h"

namespace nibble::controller {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2) + "\n", "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& code,
                const std::string& message, json details = json::array()) {
  send_json(res, status,
            {{"error", {{"message", message}, {"code", code}, {"details", std::move(details)}}}});
}

http::ServerConfig http_config(const ApiConfig& c) {
  http::ServerConfig h;
  h.name = "controller API";
  h.host = c.host;
  h.port = c.port;
  h.threads = 8;
  h.max_body_bytes = c.max_body_bytes;
  h.api_keys = c.tokens;
  h.open_paths = {"/healthz", "/metrics"};
  h.write_content_types = {"application/json", "application/yaml", "application/x-yaml",
                           "text/yaml"};
  h.write_error = [](httplib::Response& res, const http::ApiError& e) {
    send_error(res, e.status(), http::status_reason(e.status()), e.what());
  };
  return h;
}

const char* change_name(store::Change change) {
  switch (change) {
    case store::Change::kCreated:
      return "created";
    case store::Change::kConfigured:
      return "configured";
    case store::Change::kUnchanged:
      return "unchanged";
  }
  return "unchanged";
}

}  // namespace

ApiServer::ApiServer(ApiConfig config, ControllerLoop& loop, store::RecipeStore& store,
                     metrics::Registry& registry)
    : config_(std::move(config)),
      loop_(loop),
      store_(store),
      registry_(registry),
      http_(http_config(config_)) {
  routes();
}

ApiServer::~ApiServer() {
  stop();
}

void ApiServer::routes() {
  httplib::Server& routes = http_.routes();
  routes.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("OK", "text/plain");
  });
  http::serve_metrics(routes, registry_);
  routes.Get("/api/v1/recipes", [this](const httplib::Request&, httplib::Response& res) {
    json items = json::array();
    for (const RecipeStatus& st : loop_.statuses()) items.push_back(to_json(st));
    send_json(
        res, 200,
        {{"apiVersion", "nibble.dev/v1alpha1"}, {"kind", "ModelRecipeList"}, {"items", items}});
  });
  routes.Get(
      R"(/api/v1/recipes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string name = req.matches[1];
        const auto st = loop_.status(name);
        const std::string spec = store_.read(name);
        if (!st && spec.empty()) {
          send_error(res, 404, "NotFound", "modelrecipe \"" + name + "\" not found");
          return;
        }
        send_json(res, 200, {{"status", st ? to_json(*st) : json::object()}, {"spec", spec}});
      });
  routes.Get(R"(/api/v1/recipes/([^/]+)/logs)",
             [this](const httplib::Request& req, httplib::Response& res) { logs(req, res); });
  routes.Put(R"(/api/v1/recipes/([^/]+)/scale)",
             [this](const httplib::Request& req, httplib::Response& res) { scale(req, res); });
  auto apply = [this](const httplib::Request& req, httplib::Response& res) {
    this->apply(req, res);
  };
  routes.Put("/api/v1/recipes", apply);
  routes.Post("/api/v1/recipes", apply);
  routes.Delete(R"(/api/v1/recipes/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  const std::string name = req.matches[1];
                  bool removed = false;
                  try {
                    removed = store_.remove(name);
                  } catch (const store::WriteRefused& e) {
                    send_error(res, 405, "MethodNotAllowed", e.what());
                    return;
                  }
                  if (!removed) {
                    send_error(res, 404, "NotFound", "modelrecipe \"" + name + "\" not found");
                    return;
                  }
                  spdlog::info("api: modelrecipe {} deleted; draining its replicas", name);
                  loop_.wake();
                  send_json(res, 200, {{"name", name}, {"result", "deleted"}});
                });
}

void ApiServer::logs(const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  const auto st = loop_.status(name);
  if (!st) {
    send_error(res, 404, "NotFound", "modelrecipe \"" + name + "\" not found");
    return;
  }
  int lines = 50;
  if (req.has_param("tail")) {
    const std::string v = req.get_param_value("tail");
    lines = std::atoi(v.c_str());
    if (lines <= 0 || lines > 100000) {
      send_error(res, 400, "BadRequest", "tail must be 1 to 100000, got '" + v + "'");
      return;
    }
  }
  // One block per engine, each line prefixed with the engine's id (kubectl logs --prefix).
  std::string text;
  auto append = [&text](const std::string& id, const std::string& lines_text) {
    for (std::size_t at = 0; at < lines_text.size();) {
      const std::size_t nl = lines_text.find('\n', at);
      text += "[" + id + "] " + lines_text.substr(at, nl - at + 1);
      at = nl + 1;
    }
  };
  if (req.get_param_value("previous") == "true") {
    std::vector<std::filesystem::path> current;
    for (const EngineStatus& e : st->engines) current.emplace_back(e.log_file);
    const auto previous = config_.logs_dir.empty()
                              ? std::nullopt
                              : local::previous_replica_log(config_.logs_dir, name, current);
    if (!previous) {
      send_error(res, 404, "NotFound",
                 "modelrecipe \"" + name + "\" has no log of a previous replica");
      return;
    }
    append(previous->stem().string(), local::tail_lines(*previous, lines));
    res.set_content(text, "text/plain; charset=utf-8");
    return;
  }
  // Offsets as "id:bytes,id:bytes": where each engine's log was read up to.
  std::map<std::string, std::uintmax_t> offsets;
  const bool follow = req.has_param("after");
  if (follow) {
    std::stringstream in(req.get_param_value("after"));
    std::string item;
    while (std::getline(in, item, ',')) {
      const std::size_t colon = item.rfind(':');
      if (colon == std::string::npos) continue;
      offsets[item.substr(0, colon)] = std::strtoull(item.c_str() + colon + 1, nullptr, 10);
    }
  }
  std::string next;
  for (const EngineStatus& e : st->engines) {
    std::uintmax_t offset = 0;
    if (follow) {
      const auto known = offsets.find(e.id);
      if (known != offsets.end()) offset = known->second;  // else a new replica: from its start
      append(e.id, local::lines_since(e.log_file, offset));
    } else {
      append(e.id, local::tail_lines(e.log_file, lines, &offset));
    }
    next += (next.empty() ? "" : ",") + e.id + ":" + std::to_string(offset);
  }
  res.set_header("X-Nibble-Log-Offsets", next);
  res.set_content(text, "text/plain; charset=utf-8");
}

void ApiServer::scale(const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("replicas") || !body["replicas"].is_number_integer()) {
    send_error(res, 400, "BadRequest", "the body must be {\"replicas\": N}");
    return;
  }
  const std::string spec = store_.read(name);
  if (spec.empty()) {
    send_error(res, 404, "NotFound", "modelrecipe \"" + name + "\" not found");
    return;
  }
  const int replicas = body["replicas"].get<int>();
  const recipe::ScaleResult scaled = recipe::scale_recipe(spec, replicas);
  if (!scaled.error.empty()) {
    send_error(res, 422, "Invalid", scaled.error);
    return;
  }
  store::ApplyResult r;
  try {
    const std::lock_guard lock(apply_mutex_);
    r = store_.apply(scaled.yaml);
  } catch (const store::WriteRefused& e) {  // Kubernetes mode: kubectl scale writes recipes
    send_error(res, 405, "MethodNotAllowed", e.what());
    return;
  }
  if (!r.parsed.ok()) {  // the store's own rules (the model root) refuse what it holds
    send_error(res, 422, "Invalid", r.parsed.error_text());
    return;
  }
  if (r.change != store::Change::kUnchanged) {
    spdlog::info("api: modelrecipe {} scaled to {} replicas", name, replicas);
    loop_.wake();
  }
  send_json(res, 200,
            {{"name", name},
             {"replicas", replicas},
             {"result", r.change == store::Change::kUnchanged ? "unchanged" : "scaled"},
             {"autoscaling", scaled.autoscaling}});
}

void ApiServer::apply(const httplib::Request& req, httplib::Response& res) {
  const std::vector<std::string> docs = recipe::split_yaml_documents(req.body);
  if (docs.empty()) {
    send_error(res, 400, "BadRequest", "the request body holds no recipe");
    return;
  }
  // Validate all before storing any, so a file with one bad recipe changes nothing.
  json details = json::array();
  std::vector<recipe::ParseResult> parsed;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    parsed.push_back(store_.validate(docs[i]));  // the recipe, and the controller's rules
    for (const recipe::FieldError& e : parsed.back().errors) {
      details.push_back({{"document", i},
                         {"name", parsed.back().recipe.name},
                         {"field", e.field},
                         {"message", e.message}});
    }
  }
  for (const recipe::DuplicateName& d : recipe::duplicate_names(parsed)) {
    details.push_back({{"document", d.document},
                       {"name", d.name},
                       {"field", "metadata.name"},
                       {"message", d.message()}});
  }
  // A relative model path would resolve against the controller's directory, not the client's
  // (`nibble apply` sends it absolute: controller/recipe/relative_model_path.h).
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    if (!parsed[i].ok() || !recipe::has_relative_model_path(parsed[i].recipe)) continue;
    const std::string& path = parsed[i].recipe.source.path;
    std::error_code ec;
    const std::string here = (std::filesystem::current_path(ec) / path).lexically_normal().string();
    details.push_back(
        {{"document", i},
         {"name", parsed[i].recipe.name},
         {"field", "spec.model.source"},
         {"message", "'" + path + "' is a relative path, which the controller would read as " +
                         here + "; give the absolute path (nibble apply makes it absolute " +
                         "against the directory it runs in)"}});
  }
  if (!details.empty()) {
    std::string message = "invalid ModelRecipe:";
    for (const auto& d : details)
      message += "\n  " + d["field"].get<std::string>() + ": " + d["message"].get<std::string>();
    send_error(res, 422, "Invalid", message, details);
    return;
  }
  // Against the recipes already stored: served names and the recipe count. Held until the
  // writes are done, so two applies cannot both take the last free name or slot.
  std::lock_guard admission_lock(apply_mutex_);
  const std::vector<store::AdmissionError> refused =
      store::admission_errors(store_.load(), parsed, config_.max_recipes);
  if (!refused.empty()) {
    std::string message = "ModelRecipe refused:";
    for (const store::AdmissionError& e : refused) {
      message += "\n  " + e.name + (e.field.empty() ? "" : " " + e.field) + ": " + e.message;
      details.push_back(
          {{"document", e.document}, {"name", e.name}, {"field", e.field}, {"message", e.message}});
    }
    const int status = refused.front().http_status();
    send_error(res, status, http::status_reason(status), message, details);
    return;
  }
  json results = json::array();
  const bool dry_run = req.get_param_value("dryRun") == "true";
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (dry_run) {
      results.push_back({{"name", parsed[i].recipe.name}, {"result", "valid (dry run)"}});
      continue;
    }
    store::ApplyResult r;
    try {
      r = store_.apply(docs[i]);
    } catch (const store::WriteRefused& e) {  // refused as a whole: nothing was written
      send_error(res, 405, "MethodNotAllowed", e.what());
      return;
    }
    results.push_back({{"name", r.parsed.recipe.name}, {"result", change_name(r.change)}});
    if (r.change != store::Change::kUnchanged)
      spdlog::info("api: modelrecipe {} {}", r.parsed.recipe.name, change_name(r.change));
    // Routed before the answer: a request sent when apply returns is held, not a 404.
    if (r.parsed.ok()) loop_.expect_recipe(r.parsed.recipe);
  }
  if (!dry_run) loop_.wake();
  send_json(res, 200, {{"items", results}});
}

bool ApiServer::start() {
  try {
    port_ = http_.bind();
  } catch (const std::exception& e) {
    spdlog::error("{} (--api-port to change)", e.what());
    return false;
  }
  http_.start();
  spdlog::info("controller API on http://{}:{}{}", config_.host, port_,
               config_.tokens.empty() ? "" : " (bearer token required)");
  return true;
}

void ApiServer::stop() {
  http_.stop();
}

}  // namespace nibble::controller
