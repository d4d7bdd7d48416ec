#pragma once
// What `nibble-controller --backend kubernetes` adds to the daemon: the API client from
// --kubeconfig / in-cluster configuration, the KubeController (informers, the recipe store over
// their cache, work queue, status writes, Lease leader election) and the replica backend that
// applies recipe_objects().
#include <atomic>
#include <functional>
#include <memory>

#include "controller/daemon/controller_options.h"
#include "controller/kube/engine_keys.h"
#include "controller/kube/kube_client.h"
#include "controller/kube/kube_controller.h"
#include "controller/kube/kube_replica_backend.h"
#include "controller/kube/recipe_objects.h"
#include "controller/loop/recipe_status.h"

namespace nibble::controller {

class KubeMode {
 public:
  // Throws kube::KubeConfigError when no cluster configuration is found.
  explicit KubeMode(const ControllerOptions& options);
  reconcile::ReplicaBackend& backend() { return *backend_; }
  // The recipes: the ModelRecipes in the informer's cache (read-only to the controller).
  store::RecipeStore& store() { return controller_->store(); }
  void status_changed(const RecipeStatus& status) { controller_->status_changed(status); }
  // The autoscaler's count, written through the ModelRecipe's scale subresource.
  void publish_replicas(const std::string& recipe, int replicas) {
    controller_->write_scale(recipe, replicas);
  }
  // `lead` runs the reconcile loop while this replica leads.
  void start(std::function<void(const std::atomic<bool>&)> lead, std::function<void()> wake) {
    controller_->start(std::move(lead), std::move(wake));
  }
  void stop() { controller_->stop(); }
  // A Warning Event on the recipe's ModelRecipe (best effort; none when it is unknown).
  void record_warning(const std::string& recipe, const std::string& reason,
                      const std::string& message) {
    if (auto owner = controller_->owner(recipe))
      controller_->record_event(*owner, "Warning", reason, message);
  }
  const std::string& namespace_name() const { return render_.namespace_name; }

 private:
  kube::RenderOptions render_;
  std::unique_ptr<kube::KubeClient> client_;
  std::unique_ptr<kube::KubeController> controller_;
  std::unique_ptr<kube::EngineKeys> engine_keys_;
  std::unique_ptr<kube::KubeReplicaBackend> backend_;
};

}  // namespace nibble::controller
