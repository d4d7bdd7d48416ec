#pragma once
// The replica backend: what the controller loop asks of whatever runs a recipe's engines.
// The loop knows only this interface; `controller/local/` (engine processes on this machine)
// and `controller/kube/` (a Deployment per recipe on a cluster) implement it.
//
// The level is the desired state of one recipe (its last valid spec, the spec's revision and
// the replica count the autoscaler chose), not single process actions: a Kubernetes backend
// applies a Deployment with that replica count and reads back pods, a local backend plans
// start/drain/restart itself with the pure reconcile core (reconcile.h). Either way the
// backend answers with the replicas it observes, in one vocabulary (ReplicaPhase, revision,
// endpoint, restarts, exits), from which the loop derives status and routes.
//
// Contract:
//   - sync() is level-triggered and idempotent: calling it twice with the same desired state
//     changes nothing the second time; a controller restart followed by sync() converges.
//   - Replicas of another revision are rolled without dropping below the ready replicas
//     there were (surge one, drain an old one when a new one is ready).
//   - A replica whose engine exits is restarted after an exponential back-off; while one
//     waits, the observation says crash_loop with the time of the next try.
//   - drain() stops every replica of a recipe (gracefully: SIGTERM / pod termination); the
//     recipe disappears from recipes() once none is left.
//   - Calls come from the loop's one thread; implementations need no locking for them.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "controller/recipe/model_recipe.h"
#include "controller/reconcile/reconcile.h"

namespace nibble::reconcile {

// What one recipe should look like.
struct DesiredState {
  recipe::ModelRecipe recipe;  // the last valid spec
  std::string revision;        // the spec hash: replicas of another revision are rolled
  std::int64_t generation = 0;
  int replicas = 0;  // already clamped to [min, max] by the autoscaler
  // The weights (or a draft model's) are not available yet (downloading, or the download
  // failed): start no new replica, keep the running ones. A backend whose engines fetch the
  // weights themselves (Kubernetes: an init container) may ignore it.
  bool hold_starts = false;
  // Where the weights are on this machine (local backend); others place the model themselves.
  std::filesystem::path model_dir;
  // Where a draft_model's weights are on this machine (local backend), as model_dir.
  std::filesystem::path draft_model_dir;
};

// Where a replica's engine serves HTTP (the OpenAI API and /health).
struct ReplicaEndpoint {
  std::string host;  // 127.0.0.1 locally, the pod IP on Kubernetes
  int port = 0;
  // The engine's API key (local mode: one per replica, --api-key-file): the router and the
  // controller's /metrics scrape send it. Internal: never in status, describe or logs.
  std::string api_key;
};

// One exit of a replica's engine, for status messages and `nibble describe`.
struct ReplicaExit {
  std::string replica_id;
  std::string description;  // "exited with code 1 (log: ...)", "OOMKilled", ...
  std::chrono::system_clock::time_point at{};
  // The engine's last log lines before it exited, '\n'-separated (a few: what the router's
  // 503 for a crash-looping recipe quotes); "" where the backend has none.
  std::string last_log_lines;
};

struct ReplicaView {
  std::string id;        // unique per replica (pod name on Kubernetes)
  std::string revision;  // the spec hash it runs
  ReplicaPhase phase = ReplicaPhase::kStarting;
  ReplicaEndpoint endpoint;  // set once known; routed only when phase is kReady
  int restarts = 0;          // consecutive failures (restartCount on Kubernetes)
  std::string last_error;    // its last exit or a waiting reason; "" if none
  // Backend details shown by `nibble describe` (0 / "" where they do not apply).
  int pid = 0;
  std::string log_file;
};

struct RecipeObservation {
  std::vector<ReplicaView> replicas;  // draining and exited ones included
  bool crash_loop = false;            // a replica waits in restart back-off
  Clock::time_point retry_at{};       // when the next restart is due (with crash_loop)
  int restarted = 0;                  // replicas restarted by this call (for metrics)
  std::vector<ReplicaExit> exits;     // recent exits, oldest first, bounded by the backend
  // No replica is ready and some fetch the weights themselves (Kubernetes: the init container
  // of their pods), so the recipe is Downloading, not failing to start.
  bool downloading = false;
  std::string downloading_message;
};

class ReplicaBackend {
 public:
  virtual ~ReplicaBackend() = default;

  // Converges the recipe's replicas towards `desired` and reports what is observed after.
  virtual RecipeObservation sync(const DesiredState& desired, Clock::time_point now) = 0;
  // Drains every replica of a recipe that is deleted (or no longer has a valid spec to run);
  // reports what is left, empty once all are gone.
  virtual RecipeObservation drain(const std::string& recipe, Clock::time_point now) = 0;
  // The replicas last observed for a recipe, without acting or refreshing.
  virtual std::vector<ReplicaView> replicas(const std::string& recipe) const = 0;
  // Recipes that still have replicas, so the loop drains those whose recipe is gone.
  virtual std::vector<std::string> recipes() const = 0;
};

}  // namespace nibble::reconcile
