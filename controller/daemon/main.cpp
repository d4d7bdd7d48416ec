// nibble-controller: the local controller. Recipes from the state directory (and -f files)
// are reconciled into nibble-engine processes; one router serves the OpenAI API for all of
// them; a local API serves `nibble apply/get/describe/delete`.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "controller/api/api_server.h"
#include "controller/api/api_token.h"
#include "controller/daemon/controller_options.h"
#include "controller/daemon/kube_mode.h"
#include "controller/daemon/recipe_files.h"
#include "controller/local/local_backend.h"
#include "controller/local/log_retention.h"
#include "controller/loop/controller_loop.h"
#include "controller/loop/model_resolver.h"
#include "controller/recipe/recipe_set.h"
#include "controller/recipe/yaml_documents.h"
#include "controller/router/router.h"
#include "controller/store/recipe_file_store.h"
#include "metrics/registry.h"

namespace {

using namespace nibble;
namespace fs = std::filesystem;

// One controller per state directory: two would both start engines for the same recipes.
bool lock_state_dir(const fs::path& dir) {
  const fs::path path = dir / "controller.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
    spdlog::error("another nibble-controller uses {} (lock {}); stop it or pass --state-dir",
                  dir.string(), path.string());
    return false;
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || write(fd, pid.data(), pid.size()) < 0) {
    spdlog::warn("cannot write the pid into {}", path.string());
  }
  return true;  // the descriptor stays open (and locked) for the life of the process
}

// --engine-user NAME: the account engines drop to. False (logged) when it cannot be used,
// including when it could not run the engine binary.
bool resolve_engine_user(const std::string& name, const std::string& engine,
                         std::optional<local::EngineUser>& user) {
  if (name.empty()) {
    if (geteuid() == 0) {
      spdlog::warn(
          "running as root: engines run as root too; pass --engine-user NAME to run them as an "
          "unprivileged user");
    }
    return true;
  }
  try {
    user = local::lookup_engine_user(name);
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return false;
  }
  if (geteuid() == 0) {
    if (const std::string problem = local::engine_binary_access_problem(engine, *user);
        !problem.empty()) {
      spdlog::error("{}", problem);
      return false;
    }
    return true;
  }
  if (user->uid != geteuid()) {
    spdlog::error(
        "--engine-user {}: only a controller running as root can run engines as "
        "another user",
        name);
    return false;
  }
  user.reset();  // already that user: nothing to drop (and no right to call setgroups)
  return true;
}

int run(const controller::ControllerOptions& o) {
  std::error_code ec;
  fs::create_directories(o.state_dir, ec);
  if (ec) {
    spdlog::error("cannot create the state directory {}: {}", o.state_dir, ec.message());
    return 1;
  }
  if (!lock_state_dir(o.state_dir)) return 1;

  // Signals are taken by a dedicated thread; every other thread inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (!o.model_root.empty() && !fs::is_directory(o.model_root, ec)) {
    spdlog::error("--model-root {}: not a directory", o.model_root);
    return 2;
  }
  std::optional<local::EngineUser> engine_user;
  if (!resolve_engine_user(o.engine_user, o.engine, engine_user)) return 2;

  // One reconcile loop; the backend decides where engines run, the store where recipes live
  // (files in the state directory, or the ModelRecipes of the cluster).
  std::unique_ptr<controller::KubeMode> kube;
  std::unique_ptr<store::RecipeFileStore> file_store;
  std::unique_ptr<local::LocalBackend> local_backend;
  if (o.backend == "kubernetes") {
    if (!o.recipe_files.empty()) {
      spdlog::error(
          "-f: in Kubernetes mode recipes are ModelRecipe objects; apply {} with kubectl apply "
          "-f",
          o.recipe_files.front());
      return 2;
    }
    kube = std::make_unique<controller::KubeMode>(o);
  } else {
    file_store = std::make_unique<store::RecipeFileStore>(o.state_dir, o.model_root);
    if (!controller::apply_recipe_files(o.recipe_files, *file_store, std::size_t(o.max_recipes)))
      return 2;
    local_backend = std::make_unique<local::LocalBackend>(local::LocalBackendConfig{
        o.engine, o.state_dir, o.drain_timeout, o.engine_args, engine_user});
    local_backend->adopt_running();
  }
  reconcile::ReplicaBackend& backend = kube ? kube->backend() : *local_backend;
  store::RecipeStore& store = kube ? kube->store() : *file_store;
  local::LogPruner log_pruner(o.state_dir, {std::chrono::hours(o.log_retention_hours),
                                            static_cast<std::uintmax_t>(o.log_retention_mib) << 20,
                                            std::chrono::minutes(10)});
  controller::ModelResolver models(o.cache_dir, source::download_options_from_env());
  metrics::Registry registry;
  router::RouteTable routes;
  router::RouterConfig router_config;
  router_config.host = o.host;
  router_config.port = o.port;
  router_config.hold_timeout = o.hold_timeout;
  router_config.failover_timeout = o.router_failover_timeout;
  router_config.metrics_require_key = o.metrics_require_key;
  router_config.allowed_origins = o.allowed_origins;
  controller::ApiConfig api_config{o.api_host, o.api_port};
  api_config.max_recipes = std::size_t(o.max_recipes);
  if (!kube) api_config.logs_dir = fs::path(o.state_dir) / "logs";  // local_backend.cpp's
  try {
    for (const std::string& key : o.api_keys) router_config.api_keys.add(key);
    for (const std::string& file : o.api_key_files) router_config.api_keys.add_file(file);
    // A token whenever the API is reachable beyond this machine, or when asked for.
    std::string token_file = o.api_token_file;
    if (token_file.empty() && !http::is_loopback_host(o.api_host))
      token_file = controller::default_api_token_path(o.state_dir);
    if (!token_file.empty()) {
      api_config.tokens.add(controller::load_or_create_api_token(token_file));
      spdlog::info("controller API: bearer token in {}", token_file);
    }
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  if (router_config.api_keys.empty() && !http::is_loopback_host(o.host)) {
    spdlog::warn(
        "the OpenAI endpoint listens on {} without an API key: anyone who reaches it "
        "can use every model (--api-key or --api-key-file; docs/security.md)",
        o.host);
  }
  router::Router router(routes, registry, router_config);
  if (!router.start()) return 1;
  const std::string shown_host = o.host == "0.0.0.0" || o.host == "::" ? "localhost" : o.host;
  const std::string endpoint =
      !o.endpoint.empty() ? o.endpoint
                          : "http://" + shown_host + ":" + std::to_string(router.port()) + "/v1";

  controller::ControllerLoopConfig loop_config{o.state_dir, o.resync, endpoint};
  if (kube) {
    loop_config.resolve_models = false;  // the engine pods fetch their weights
    loop_config.status_changed = [&kube](const controller::RecipeStatus& s) {
      kube->status_changed(s);
    };
    loop_config.publish_replicas = [&kube](const std::string& recipe, int replicas) {
      kube->publish_replicas(recipe, replicas);
    };
  }
  controller::ControllerLoop loop(
      loop_config, store, backend, models, routes, registry, [&router](const std::string& recipe) {
        return controller::RouterLoad{router.inflight(recipe), router.held(recipe),
                                      router.last_request(recipe)};
      });
  router.set_demand_callback([&loop](const std::string&) { loop.wake(); });
  // A replica that died serving a request: an Event on the recipe (Kubernetes); locally the
  // router's warning in the log and nibble_controller_router_replica_failures_total.
  if (kube) {
    router.set_failure_callback([&kube](const router::ReplicaFailure& f) {
      kube->record_warning(f.recipe, "ReplicaDiedServingRequest", f.message);
    });
  }
  controller::ApiServer api(std::move(api_config), loop, store, registry);
  if (!api.start()) return 1;
  spdlog::info("nibble-controller: OpenAI endpoint {}, state in {}, engine {}", endpoint,
               o.state_dir, o.engine);

  std::atomic<bool> stop{false};
  std::thread reconciler;
  if (kube) {
    spdlog::info("nibble-controller: Kubernetes backend, namespace {}{}", kube->namespace_name(),
                 o.leader_elect ? ", leader election on" : "");
    kube->start([&loop](const std::atomic<bool>& leading_stop) { loop.run(leading_stop); },
                [&loop] { loop.wake(); });
  } else {
    reconciler = std::thread([&] { loop.run(stop); });
  }
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("{}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  stop = true;
  loop.wake();
  if (kube) {
    kube->stop();  // stops the loop, gives the Lease up; the engines stay with their Deployments
    api.stop();
    router.stop();
    return 0;
  }
  reconciler.join();
  api.stop();
  if (o.keep_engines_on_exit) {
    router.stop();
    spdlog::info(
        "leaving the engines running (--keep-engines-on-exit); the next controller "
        "adopts them");
  } else {
    // Engines drain their in-flight requests while the router still streams them.
    local_backend->stop_all(o.drain_timeout);
    router.stop();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nibble::controller::ControllerOptions options;
  try {
    if (!nibble::controller::parse_controller_options({argv + 1, argv + argc}, options)) return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "nibble-controller: %s\n", e.what());
    return 2;
  }
  if (options.check_options) {  // the install tests run the manifests' args through here
    std::printf(
        "nibble-controller: options ok: backend=%s leader-elect=%s engine-image=%s host=%s "
        "port=%d state-dir=%s log-level=%s\n",
        options.backend.c_str(), options.leader_elect ? "true" : "false",
        options.engine_image.c_str(), options.host.c_str(), options.port, options.state_dir.c_str(),
        options.log_level.c_str());
    if (options.backend == "kubernetes") {
      const nibble::kube::RenderOptions& r = options.render;
      std::printf("nibble-controller: endpoint=%s engine pods: hf-token-secret=%s model-cache=%s\n",
                  options.endpoint.c_str(), r.hf_token_secret.c_str(),
                  nibble::kube::describe(r.model_cache).c_str());
    }
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  try {
    return run(options);
  } catch (const std::exception& e) {
    spdlog::critical("nibble-controller: {}", e.what());
    return 1;
  }
}
