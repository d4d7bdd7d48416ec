#pragma once
// The Kubernetes mode's outer machinery around the one reconcile loop (controller_loop.h):
//   - informers on the namespace's ModelRecipes and on the Deployments and Pods that carry the
//     recipe label (the replica backend reads them);
//   - the recipe store the loop reads (store()): an InformerRecipeStore over the ModelRecipe
//     informer's cache, so a recipe goes watch → cache → loop → replica backend;
//   - a work queue of recipe keys ("namespace/name"), fed by every recipe change, by changes
//     of the Deployments and Pods a recipe owns, and by a periodic resync of all keys; its
//     worker wakes the loop when a recipe's spec changed or it was deleted, and writes the
//     recipe's latest status through the status subresource; a failed key is retried after
//     its own exponential back-off;
//   - optional Lease leader election: only the leader runs the loop and writes status; a
//     replica that loses the lease stops both at once;
//   - the autoscaler's replica counts go to each ModelRecipe's scale subresource (write_scale).
// A ModelRecipe that parses on the API server but not here keeps its last valid spec
// running (the loop reports the errors in the Degraded condition); they also go out as a
// Warning Event.
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "controller/kube/informer.h"
#include "controller/kube/informer_recipe_store.h"
#include "controller/kube/kube_client.h"
#include "controller/kube/kube_replica_backend.h"
#include "controller/kube/leader_election.h"
#include "controller/kube/work_queue.h"
#include "controller/loop/recipe_status.h"

namespace nibble::kube {

struct KubeControllerConfig {
  std::string namespace_name;
  std::string recipe_label = "nibble.dev/recipe";
  bool leader_elect = false;
  LeaderElectionConfig election;  // namespace_name is filled in from above when empty
  InformerOptions informer;       // back-off and watch timeout (the selector is set here)
  WorkQueueOptions queue;
  std::chrono::milliseconds resync{30000};
  // status.selector, the scale subresource's labelSelectorPath: the label selector string of a
  // recipe's engine pods (the daemon passes recipe_objects' pod_selector). Unset:
  // recipe_label=NAME.
  std::function<std::string(const std::string& recipe)> pod_selector;
  // Confines recipes' local model paths, as in local mode (controller/recipe/model_root.h).
  std::filesystem::path model_root;
};

class KubeController {
 public:
  KubeController(const KubeClient& client, KubeControllerConfig config);
  ~KubeController();

  // The recipes the loop reconciles: the ModelRecipe informer's cache.
  store::RecipeStore& store() { return *store_; }

  const Informer& deployments() const { return *deployments_; }
  const Informer& pods() const { return *pods_; }
  // The ModelRecipe's identity for owner references and Events.
  std::optional<RecipeOwner> owner(const std::string& recipe) const;
  // Creates an Event on the ModelRecipe (best effort: failures are logged).
  void record_event(const RecipeOwner& owner, const std::string& type, const std::string& reason,
                    const std::string& message);
  // The loop's status_changed: queues the status for the recipe's key.
  void status_changed(const controller::RecipeStatus& status);
  // The loop's publish_replicas: writes the built-in autoscaler's count into the ModelRecipe's
  // spec.replicas.desired through its scale subresource, the field kubectl scale and HPAs use.
  // An update with the cached resourceVersion; a 409 (the cache lagged, or someone scaled in
  // between) reads the Scale again and writes once more. Throws KubeError.
  void write_scale(const std::string& recipe, int replicas);

  // Starts the informers, the worker and (with leader_elect) the election. `lead` runs the
  // loop until its stop flag is set and `wake` wakes it; lead runs while this replica leads
  // (always without leader election).
  void start(std::function<void(const std::atomic<bool>& stop)> lead, std::function<void()> wake);
  void stop();
  bool leading() const { return leading_.load(); }
  int status_writes() const { return status_writes_.load(); }

 private:
  void on_change(const ObjectChange& change, bool is_recipe);
  void work();
  void sync_key(const std::string& key);
  void start_leading();
  void stop_leading();
  void resync_all();

  const KubeClient& client_;
  KubeControllerConfig config_;
  std::unique_ptr<Informer> recipes_, deployments_, pods_;
  std::unique_ptr<InformerRecipeStore> store_;
  WorkQueue queue_;
  std::unique_ptr<LeaderElector> elector_;
  std::function<void(const std::atomic<bool>&)> lead_;
  std::function<void()> wake_;

  mutable std::mutex mutex_;
  std::map<std::string, nlohmann::json> pending_status_;  // by recipe name
  std::map<std::string, std::string> seen_spec_;          // the recipe document last seen, by name
  std::map<std::string, std::string> written_status_;

  std::atomic<bool> leading_{false}, stopping_{false};
  std::atomic<int> status_writes_{0};
  std::atomic<bool> lead_stop_{false};
  std::thread lead_thread_;
  std::mutex lead_mutex_;  // start/stop of lead_thread_
  std::vector<std::thread> threads_;
};

}  // namespace nibble::kube
