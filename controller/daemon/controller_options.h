#pragma once
// `nibble-controller` options. Every error names the flag; defaults put state under the XDG
// directories so a plain `nibble-controller -f recipe.yaml` works for a desktop user.
#include <chrono>
#include <string>
#include <vector>

#include "controller/kube/recipe_objects.h"
#include "controller/store/recipe_admission.h"

namespace nibble::controller {

struct ControllerOptions {
  std::string state_dir;           // recipes/, replicas/, logs/, status/
  std::string cache_dir;           // hf:// downloads
  std::string host = "127.0.0.1";  // the router's OpenAI endpoint (--host, --router-host)
  // --endpoint: the router's URL as clients reach it, shown in status (Kubernetes: the Service's
  // DNS name); "" for http://HOST:PORT/v1.
  std::string endpoint;
  int port = 8000;
  std::string api_host = "127.0.0.1";
  int api_port = 8001;
  std::vector<std::string> api_keys;       // the router's client keys (--api-key)
  std::vector<std::string> api_key_files;  // --api-key-file, one key per line
  bool metrics_require_key = false;        // the router's /metrics needs a key too
  std::string api_token_file;              // the controller API's token; default beyond loopback:
                                           // <state_dir>/api-token, generated
  std::string engine;                      // nibble-engine binary
  std::vector<std::string> engine_args;    // added to every engine's command line
  std::vector<std::string> recipe_files;   // applied at start-up
  std::string model_root;   // --model-root: recipes' local model paths must lie inside it
  std::string engine_user;  // --engine-user: engines run as this user (controller as root)
  // --max-recipes: applies that would hold more recipes are refused (recipe_admission.h).
  int max_recipes = int(store::kDefaultMaxRecipes);
  std::chrono::milliseconds resync{2000};
  std::chrono::seconds drain_timeout{30};
  std::chrono::seconds hold_timeout{120};
  std::chrono::seconds router_failover_timeout{30};  // RouterConfig::failover_timeout
  std::vector<std::string> allowed_origins;          // the router's CORS allow-list
  bool keep_engines_on_exit = false;
  // Logs of engines that are gone: kept this long and within this total (0: no limit).
  int log_retention_hours = 24 * 7;
  int log_retention_mib = 100;
  std::string log_level = "info";
  // --backend kubernetes: recipes are ModelRecipe resources, engines Deployments.
  std::string backend = "local";  // local | kubernetes
  std::string kubeconfig;         // "" : $KUBECONFIG, in-cluster, ~/.kube/config
  std::string namespace_name;     // "" : the kubeconfig context's or the pod's namespace
  bool leader_elect = false;
  std::string engine_image;  // "" : recipe_objects' default
  // kubernetes: how engine pods look (kube/render_flags.h: --hf-token-secret,
  // --model-cache-pvc, --model-cache-host-path, --engine-cpu, ...), the flags `nibble render`
  // takes.
  kube::RenderOptions render;
  bool check_options = false;  // --check-options: parse and validate, start nothing
};

// Returns false when --help or --version was handled (printed). Throws std::invalid_argument.
bool parse_controller_options(const std::vector<std::string>& args, ControllerOptions& options);
extern const char* const kControllerUsage;

}  // namespace nibble::controller
