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
#include "controller/local/local_backend.h"
#include "controller/loop/controller_loop.h"
#include "controller/loop/model_resolver.h"
#include "controller/recipe/yaml_documents.h"
#include "controller/router/router.h"
#include "controller/store/recipe_store.h"
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

// Validates every recipe of every -f file before storing any.
bool apply_recipe_files(const std::vector<std::string>& files, store::RecipeStore& store) {
  std::vector<std::string> docs;
  bool ok = true;
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) {
      spdlog::error("cannot read recipe file {}", file);
      ok = false;
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    for (std::string& doc : recipe::split_yaml_documents(text.str())) {
      const recipe::ParseResult parsed = recipe::parse_model_recipe(doc);
      if (!parsed.ok()) {
        spdlog::error("{}: invalid ModelRecipe:\n{}", file, parsed.error_text());
        ok = false;
      }
      docs.push_back(std::move(doc));
    }
  }
  if (!ok) return false;
  for (const std::string& doc : docs) {
    const store::ApplyResult r = store.apply(doc);
    spdlog::info("modelrecipe {} {}", r.parsed.recipe.name,
                 r.change == store::Change::kCreated      ? "created"
                 : r.change == store::Change::kConfigured ? "configured"
                                                          : "unchanged");
  }
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

  store::RecipeStore store(o.state_dir);
  if (!apply_recipe_files(o.recipe_files, store)) return 2;

  local::LocalBackend backend({o.engine, o.state_dir, o.drain_timeout, o.engine_args});
  backend.adopt_running();
  controller::ModelResolver models(o.cache_dir, source::download_options_from_env());
  metrics::Registry registry;
  router::RouteTable routes;
  router::RouterConfig router_config;
  router_config.host = o.host;
  router_config.port = o.port;
  router_config.hold_timeout = o.hold_timeout;
  router_config.metrics_require_key = o.metrics_require_key;
  controller::ApiConfig api_config{o.api_host, o.api_port};
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
  const std::string endpoint = "http://" + shown_host + ":" + std::to_string(router.port()) + "/v1";

  controller::ControllerLoop loop({o.state_dir, o.resync, endpoint}, store, backend, models, routes,
                                  registry, [&router](const std::string& recipe) {
                                    return controller::RouterLoad{router.inflight(recipe),
                                                                  router.held(recipe),
                                                                  router.last_request(recipe)};
                                  });
  router.set_demand_callback([&loop](const std::string&) { loop.wake(); });
  controller::ApiServer api(std::move(api_config), loop, store, registry);
  if (!api.start()) return 1;
  spdlog::info("nibble-controller: OpenAI endpoint {}, state in {}, engine {}", endpoint,
               o.state_dir, o.engine);

  std::atomic<bool> stop{false};
  std::thread reconciler([&] { loop.run(stop); });
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("{}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  stop = true;
  loop.wake();
  reconciler.join();
  api.stop();
  if (o.keep_engines_on_exit) {
    router.stop();
    spdlog::info(
        "leaving the engines running (--keep-engines-on-exit); the next controller "
        "adopts them");
  } else {
    // Engines drain their in-flight requests while the router still streams them.
    backend.stop_all(o.drain_timeout);
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
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  try {
    return run(options);
  } catch (const std::exception& e) {
    spdlog::critical("nibble-controller: {}", e.what());
    return 1;
  }
}
