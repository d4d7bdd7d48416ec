#pragma once
// The controller's reconcile loop. Each pass is level-triggered: it reloads every recipe from
// the store, measures load, lets the autoscaler pick a replica count (published through
// publish_replicas where the cluster holds it), tells the replica backend
// (controller/reconcile/replica_backend.h: local processes or a Kubernetes Deployment) the
// desired state, publishes the ready replicas to the router and derives each recipe's typed
// status from the facts observed (controller/reconcile/recipe_conditions.h), written to
// state_dir/status/*.json. Passes run every `resync` and at once after wake() (an apply, a
// delete, a request held for a recipe at zero replicas). The loop knows no backend but the
// interface.
//
// An invalid edit of a running recipe keeps the last valid spec running and reports the errors
// in the Degraded condition, as an API server would reject the edit; replicas of a recipe whose
// file is gone are drained.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/autoscaler/autoscaler.h"
#include "controller/loop/controller_metrics.h"
#include "controller/loop/model_resolver.h"
#include "controller/loop/recipe_status.h"
#include "controller/reconcile/replica_backend.h"
#include "controller/router/route_table.h"
#include "controller/store/recipe_store.h"

namespace nibble::controller {

// What the router knows about one recipe's traffic.
struct RouterLoad {
  int inflight = 0;  // forwarded and held requests
  int held = 0;      // held for a replica to become ready
  std::chrono::steady_clock::time_point last_request{};
};

struct ControllerLoopConfig {
  std::filesystem::path state_dir;
  std::chrono::milliseconds resync{2000};
  std::string endpoint;  // the router's URL, shown in status
  // False where the backend's replicas fetch the weights themselves (Kubernetes: an init
  // container), so the controller neither downloads nor waits for them.
  bool resolve_models = true;
  // Told every status that changed, after the status file is written (the Kubernetes backend
  // writes it to the ModelRecipe's status subresource: to_crd_status()).
  std::function<void(const RecipeStatus&)> status_changed;
  // Where the built-in autoscaler's count goes when something other than the loop holds it
  // (Kubernetes: the ModelRecipe's scale subresource, i.e. spec.replicas.desired). When set,
  // a recipe with autoscaling on runs the count its spec holds, and a decision that differs is
  // published here; the next pass sees it come back in the spec. Unset (local mode): the
  // decision is run directly. Throws on failure (reported in the Degraded condition).
  std::function<void(const std::string& recipe, int replicas)> publish_replicas;
};

enum class ScaleDirection { kKeep, kUp, kDown };
const char* to_string(ScaleDirection direction);

class ControllerLoop {
 public:
  ControllerLoop(ControllerLoopConfig config, store::RecipeStore& store,
                 reconcile::ReplicaBackend& backend, ModelResolver& models,
                 router::RouteTable& routes, metrics::Registry& registry,
                 std::function<RouterLoad(const std::string& recipe)> router_load);

  // One pass over every recipe.
  void reconcile_once();
  // Passes until stop is set (checked at every wake-up).
  void run(const std::atomic<bool>& stop);
  void wake();
  // Called once a recipe is stored (an apply) and before the apply is answered: a recipe the
  // router does not know yet is routed at once as starting, so that a request sent the moment
  // apply returns is held as at a cold start instead of refused with 404; a pass is woken to
  // route it for real (or to remove the route, should the pass find the recipe invalid).
  void expect_recipe(const recipe::ModelRecipe& recipe);

  std::vector<RecipeStatus> statuses() const;
  std::optional<RecipeStatus> status(const std::string& name) const;

 private:
  struct Running {  // the last valid spec of a recipe
    recipe::ModelRecipe recipe;
    std::string spec_hash;
    std::int64_t generation = 0;
  };
  // Syncs one recipe through the backend and routes it; fills the status's counts and engines
  // and the facts its conditions follow from.
  RecipeStatus reconcile_recipe(const Running& running, reconcile::RecipeFacts& facts,
                                reconcile::Clock::time_point now);
  void drain_deleted(const std::string& name, reconcile::Clock::time_point now);
  // What /v1/models shows of the recipe's model: the engine's own answer once a ready replica
  // of this revision gave it, else the last one known, else what the recipe says.
  router::ModelCard model_card(const recipe::ModelRecipe& recipe, const std::string& revision,
                               const std::vector<reconcile::ReplicaView>& replicas);
  autoscaler::Load measure_load(const recipe::ModelRecipe& recipe);
  void publish_status(const RecipeStatus& status);
  void forget_status(const std::string& name);

  ControllerLoopConfig config_;
  store::RecipeStore& store_;
  reconcile::ReplicaBackend& backend_;
  ModelResolver& models_;
  router::RouteTable& routes_;
  ControllerMetrics metrics_;
  std::function<RouterLoad(const std::string&)> router_load_;

  std::map<std::string, Running> running_;  // by recipe name
  std::map<std::string, autoscaler::ScaleState> scale_;
  struct Published {  // a count written through publish_replicas, not yet back in the spec
    int replicas = 0;
    std::optional<int> spec_then;  // spec.replicas.desired when it was written
    reconcile::Clock::time_point at;
  };
  std::map<std::string, Published> published_;
  struct KnownCard {
    std::string revision;  // of the replica that answered; "" until one did
    router::ModelCard card;
    std::set<std::string> asked;  // replicas asked for this revision's card
  };
  std::map<std::string, KnownCard> cards_;           // by recipe name
  std::map<std::string, std::string> last_written_;  // status JSON as written, by name

  mutable std::mutex mutex_;  // guards statuses_ and wake_
  std::condition_variable woken_;
  bool wake_ = false;
  std::map<std::string, RecipeStatus> statuses_;
};

}  // namespace nibble::controller
