#include "controller/daemon/controller_options.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "cli/flag_reader.h"
#include "controller/kube/render_flags.h"
#include "http/cors.h"

namespace nibble::controller {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string home() {
  return env_or("HOME", "/tmp");
}

// nibble-engine installed next to this binary, or in the build tree (build/engine/), else
// whatever PATH finds.
std::string default_engine() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate :
         {self.parent_path() / "nibble-engine",
          self.parent_path().parent_path().parent_path() / "engine" / "nibble-engine"}) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "nibble-engine";
}

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  const auto n = cli::parse_integer(v, lo, hi);
  if (!n) {
    throw std::invalid_argument(flag + ": expected an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi) + ", got '" + v + "'");
  }
  return int(*n);
}

// A switch: bare, or --switch=true|false (the form Deployments and helm values write).
bool to_switch(const std::string& flag, bool has_value, const std::string& v) {
  if (!has_value || v == "true") return true;
  if (v == "false") return false;
  throw std::invalid_argument(flag + ": expected true or false, got '" + v + "'");
}

// One of `nibble render`'s flags (kube/render_flags.h) at args[i]: the arguments it took (the
// flag and maybe its value), 0 when it is not one of them.
std::size_t take_render_flag(const std::vector<std::string>& args, std::size_t i,
                             kube::RenderOptions& render) {
  std::vector<std::string> window = {"nibble-controller", args[i]};
  if (i + 1 < args.size()) window.push_back(args[i + 1]);
  std::vector<char*> argv;
  for (std::string& a : window) argv.push_back(a.data());
  cli::FlagReader flags("nibble-controller", int(argv.size()), argv.data());
  flags.next();
  return kube::take_render_flag(flags, render) ? flags.consumed() : 0;
}

}  // namespace

const char* const kControllerUsage = R"(usage: nibble-controller [options]

Reconciles ModelRecipes into nibble-engine processes on this machine and serves one
OpenAI-compatible endpoint for all of them.

  -f, --recipe FILE          apply this recipe file at start-up (repeatable; YAML or JSON,
                             several recipes separated by ---)
  --state-dir DIR            recipes/, status/, replicas/ and engine logs/
                             (default $NIBBLE_STATE_DIR or ~/.local/state/nibble)
  --cache-dir DIR            hf:// model downloads (default $NIBBLE_CACHE or ~/.cache/nibble)
  --host, --router-host HOST OpenAI endpoint (router) address (default 127.0.0.1; use
                             0.0.0.0 to expose it, with --api-key: see docs/security.md)
  --port PORT                OpenAI endpoint port (default 8000)
  --endpoint URL             the endpoint as clients reach it, shown in recipes' status
                             (default http://HOST:PORT/v1; on Kubernetes the Service's URL)
  --api-key KEY              require 'Authorization: Bearer KEY' at the router on every path
                             but /health and /metrics (repeatable; or $NIBBLE_API_KEY)
  --api-key-file FILE        router API keys from a file, one per line (repeatable)
  --metrics-require-key      the router's /metrics needs a key too
  --allowed-origins LIST     browser origins (comma-separated scheme://host[:port], or *)
                             whose pages may call the router cross-origin (default: none)
  --api-host HOST            controller API address for `nibble` (default 127.0.0.1)
  --api-port PORT            controller API port (default 8001)
  --api-token-file FILE      bearer token of the controller API (created if missing); on by
                             default when --api-host is not loopback, in STATE_DIR/api-token
  --engine PATH              nibble-engine binary (default: next to this one, else PATH)
  --engine-arg ARG           add ARG to every engine's command line (repeatable)
  --model-root DIR           recipes' local model paths (file:// and plain) must resolve
                             inside DIR, symlinks and .. followed; others are refused
  --engine-user NAME         run engines as this user (a controller running as root
                             drops their uid, gid and groups to it; NAME or a uid)
  --max-recipes N            refuse applies that would hold more than N recipes (default
                             1000; each costs memory and a share of every reconcile pass)
  --resync-seconds S         seconds between reconcile passes (default 2)
  --drain-timeout S          SIGTERM, then SIGKILL after S seconds (default 30)
  --hold-timeout S           how long a request waits for a replica to start (default 120)
  --router-failover-timeout S  how long a request whose replicas all fail to connect keeps
                             trying ready ones before a 502 (default 30)
  --keep-engines-on-exit     leave engines running on SIGTERM/SIGINT (the next controller
                             adopts them); by default they are drained and stopped
  --log-retention-hours H    delete logs of engines that are gone once H hours old
                             (default 168, 0: no age limit); checked at start and every 10 min
  --log-retention-mib M      and the oldest of them while all engine logs exceed M MiB
                             (default 100, 0: no size limit); running engines' logs are kept
  --log-level LEVEL          trace|debug|info|warn|error (default info)
  --backend local|kubernetes engines as processes here (default) or, with kubernetes,
                             ModelRecipe resources reconciled into Deployments on a cluster
  --kubeconfig FILE          kubernetes: the kubeconfig (default $KUBECONFIG, in-cluster,
                             then ~/.kube/config)
  --namespace NS             kubernetes: the namespace watched (default the context's/pod's)
  --leader-elect             kubernetes: only the holder of a Lease reconciles
  --engine-image IMAGE       kubernetes: the engine image of the Deployments
  (kubernetes: the engine pods' flags of `nibble render` below also apply)
  --check-options            parse and validate these options, then exit 0 (nothing starts)
  -h, --help                 this text
  --version                  print the version

Switches also take --switch=true|false; every option with a value takes --option=VALUE.
)";

bool parse_controller_options(const std::vector<std::string>& args, ControllerOptions& o) {
  o.state_dir = env_or("NIBBLE_STATE_DIR", home() + "/.local/state/nibble");
  o.cache_dir = env_or("NIBBLE_CACHE", home() + "/.cache/nibble");
  o.engine = default_engine();
  if (const char* key = std::getenv("NIBBLE_API_KEY"); key != nullptr && *key != '\0')
    o.api_keys.push_back(key);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw std::invalid_argument(flag + ": missing value");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      std::fputs(kControllerUsage, stdout);
      std::printf("\nEngine pods (kubernetes):\n%s", kube::render_flags_usage());
      return false;
    } else if (flag == "--version") {
      std::printf("nibble-controller %s\n", NIBBLE_VERSION);
      return false;
    } else if (flag == "-f" || flag == "--recipe") {
      o.recipe_files.push_back(next());
    } else if (flag == "--state-dir") {
      o.state_dir = next();
    } else if (flag == "--cache-dir") {
      o.cache_dir = next();
    } else if (flag == "--host" || flag == "--router-host") {
      o.host = next();
    } else if (flag == "--endpoint") {
      o.endpoint = next();
      if (o.endpoint.rfind("http://", 0) != 0 && o.endpoint.rfind("https://", 0) != 0)
        throw std::invalid_argument(flag + ": expected an http:// or https:// URL");
    } else if (flag == "--port") {
      o.port = to_int(flag, next(), 0, 65535);
    } else if (flag == "--api-host") {
      o.api_host = next();
    } else if (flag == "--api-port") {
      o.api_port = to_int(flag, next(), 0, 65535);
    } else if (flag == "--api-key") {
      const std::string key = next();
      if (key.empty()) throw std::invalid_argument(flag + ": must not be empty");
      o.api_keys.push_back(key);
    } else if (flag == "--api-key-file") {
      o.api_key_files.push_back(next());
    } else if (flag == "--allowed-origins") {
      for (std::string& origin : http::parse_origin_list(next()))
        o.allowed_origins.push_back(std::move(origin));
    } else if (flag == "--metrics-require-key") {
      o.metrics_require_key = true;
    } else if (flag == "--api-token-file") {
      o.api_token_file = next();
    } else if (flag == "--engine") {
      o.engine = next();
    } else if (flag == "--engine-arg") {
      o.engine_args.push_back(next());
    } else if (flag == "--model-root") {
      o.model_root = next();
      if (o.model_root.empty()) throw std::invalid_argument(flag + ": expected a directory");
    } else if (flag == "--engine-user") {
      o.engine_user = next();
      if (o.engine_user.empty()) throw std::invalid_argument(flag + ": expected a user name");
    } else if (flag == "--max-recipes") {
      o.max_recipes = to_int(flag, next(), 1, 1000000);
    } else if (flag == "--resync-seconds") {
      const std::string v = next();
      char* end = nullptr;
      const double s = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(s >= 0.05 && s <= 3600))
        throw std::invalid_argument(flag + ": expected seconds from 0.05 to 3600, got '" + v + "'");
      o.resync = std::chrono::milliseconds(static_cast<long>(s * 1000));
    } else if (flag == "--drain-timeout") {
      o.drain_timeout = std::chrono::seconds(to_int(flag, next(), 0, 86400));
    } else if (flag == "--hold-timeout") {
      o.hold_timeout = std::chrono::seconds(to_int(flag, next(), 0, 86400));
    } else if (flag == "--router-failover-timeout") {
      o.router_failover_timeout = std::chrono::seconds(to_int(flag, next(), 0, 86400));
    } else if (flag == "--keep-engines-on-exit") {
      o.keep_engines_on_exit = to_switch(flag, has_value, value);
    } else if (flag == "--log-retention-hours") {
      o.log_retention_hours = to_int(flag, next(), 0, 24 * 3650);
    } else if (flag == "--log-retention-mib") {
      o.log_retention_mib = to_int(flag, next(), 0, 1 << 20);
    } else if (flag == "--log-level") {
      o.log_level = next();
      if (o.log_level != "trace" && o.log_level != "debug" && o.log_level != "info" &&
          o.log_level != "warn" && o.log_level != "error")
        throw std::invalid_argument(flag + ": expected trace|debug|info|warn|error, got '" +
                                    o.log_level + "'");
    } else if (flag == "--backend") {
      o.backend = next();
      if (o.backend != "local" && o.backend != "kubernetes")
        throw std::invalid_argument(flag + ": expected local|kubernetes, got '" + o.backend + "'");
    } else if (flag == "--kubeconfig") {
      o.kubeconfig = next();
    } else if (flag == "--namespace") {
      o.namespace_name = next();
    } else if (flag == "--leader-elect") {
      o.leader_elect = to_switch(flag, has_value, value);
    } else if (flag == "--engine-image") {
      o.engine_image = next();
    } else if (flag == "--check-options") {
      o.check_options = to_switch(flag, has_value, value);
    } else if (const std::size_t used = take_render_flag(args, i, o.render); used > 0) {
      i += used - 1;
    } else {
      throw std::invalid_argument("unknown option '" + args[i] + "' (see --help)");
    }
  }
  return true;
}

}  // namespace nibble::controller
