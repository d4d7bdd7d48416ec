#pragma once
// The controller's local API (default 127.0.0.1:8001), used by `nibble apply/get/describe/
// delete`; loopback only by default, since it starts processes:
//   GET    /api/v1/recipes          {"kind": "ModelRecipeList", "items": [status...]}
//   GET    /api/v1/recipes/NAME     {"status": {...}, "spec": "<stored YAML>"}
//   PUT    /api/v1/recipes          body: one or more YAML/JSON recipes (`---`); all are
//   POST   /api/v1/recipes          validated first, none stored if any is invalid (422: field
//                                   errors, a relative model path), takes a servedName another
//                                   recipe serves (409) or adds recipes beyond max_recipes
//                                   (403); ?dryRun=true checks only
//   GET    /api/v1/recipes/NAME/logs?tail=N   the last N (50) lines of each engine's log,
//                                   prefixed with the engine's id; the header
//                                   X-Nibble-Log-Offsets ("id:bytes,...") says where they end
//          .../logs?after=OFFSETS   what each engine wrote since those offsets (from the start
//                                   for an engine not named: a new replica), for `logs -f`
//          .../logs?previous=true   the last N lines of the newest log of a replica of this
//                                   recipe that is gone (404 when there is none)
//   PUT    /api/v1/recipes/NAME/scale   body {"replicas": N}: sets spec.replicas.desired
//                                   (controller/recipe/recipe_scale.h); 422 outside [min, max]
//   DELETE /api/v1/recipes/NAME     404 when there is no such recipe
//   GET    /healthz, /metrics       the controller's own health and metrics
// Errors come in the OpenAI/Kubernetes-like shape {"error": {"message", "code", "details"}}.
// The HTTP layer (http/server.h) refuses what a web page could send: a foreign Host on
// loopback (DNS rebinding), a foreign Origin on writes, writes that are not JSON or YAML; with
// tokens, every path but /healthz and /metrics needs `Authorization: Bearer <token>`.
#include <httplib.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "controller/loop/controller_loop.h"
#include "controller/store/recipe_admission.h"
#include "controller/store/recipe_store.h"
#include "http/server.h"
#include "metrics/registry.h"

namespace nibble::controller {

struct ApiConfig {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: any free port
  std::size_t max_body_bytes = 1 << 20;
  http::ApiKeys tokens;  // empty: no authentication (loopback only, see docs/security.md)
  std::size_t max_recipes = store::kDefaultMaxRecipes;  // --max-recipes
  std::filesystem::path logs_dir;  // the local backend's engine logs; empty: no --previous
};

class ApiServer {
 public:
  ApiServer(ApiConfig config, ControllerLoop& loop, store::RecipeStore& store,
            metrics::Registry& registry);
  ~ApiServer();
  bool start();  // false (logged) when the address cannot be bound
  int port() const { return port_; }
  void stop();

 private:
  void routes();
  void apply(const httplib::Request& req, httplib::Response& res);
  void logs(const httplib::Request& req, httplib::Response& res);
  void scale(const httplib::Request& req, httplib::Response& res);

  ApiConfig config_;
  ControllerLoop& loop_;
  store::RecipeStore& store_;
  metrics::Registry& registry_;
  http::Server http_;
  int port_ = 0;
  std::mutex apply_mutex_;  // admission and the writes it admits, one apply at a time
};

}  // namespace nibble::controller
