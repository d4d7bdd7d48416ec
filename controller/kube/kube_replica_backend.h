#pragma once
// The Kubernetes replica backend (replica_backend.h): a recipe's replicas are the Pods of one
// Deployment. sync() server-side applies the recipe's objects (Deployment with the desired
// replica count, Service, PodMonitor: whatever `render` returns, owned by the ModelRecipe so
// deleting it garbage-collects them) and reads the replicas back from the Pods the informers
// cache; drain() scales the Deployment to zero through its scale subresource. The Deployment
// controller and the kubelet do the rolling, restarting and back-off the local backend does by
// hand, so a recipe's observation is what the Pods say (pod_replicas.h).
//
// Pods are read every pass: an increase of the engine's restartCount is reported as
// `restarted` (the restarts metric and its alert), a pod that starts failing (pod_replicas.h:
// CrashLoopBackOff, ImagePullBackOff, OOMKilled, ...) gets one Warning Event on the ModelRecipe.
//
// Applies are skipped while the rendered objects equal the last ones applied and the
// Deployment is in the cache (a deleted Deployment is applied again on the next pass). A 409 or
// a transient failure (no answer, 429, 5xx) is retried `retries` times with a doubling pause;
// what still fails is thrown, and the loop reports it in the recipe's Degraded condition.
//
// With engine keys, each recipe's key Secret is created first (engines read their key from it)
// and each replica's endpoint carries the key, so the router authenticates to the engines.
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/kube/informer.h"
#include "controller/kube/kube_client.h"
#include "controller/kube/pod_replicas.h"
#include "controller/reconcile/replica_backend.h"

namespace nibble::kube {

// The ModelRecipe that owns a recipe's objects.
struct RecipeOwner {
  std::string namespace_name, name, uid;
  nlohmann::json reference() const;  // a controller owner reference to it
};

struct KubeReplicaBackendConfig {
  std::string namespace_name;
  std::string recipe_label = "nibble.dev/recipe";  // on the Deployment and its Pods
  PodReading pods;
  // The objects to apply for a recipe; the first is its Deployment.
  std::function<std::vector<nlohmann::json>(const reconcile::DesiredState&, const RecipeOwner&)>
      render;
  // The recipe's ModelRecipe (uid for owner references); nullopt when it is not known.
  std::function<std::optional<RecipeOwner>(const std::string& recipe)> owner;
  // Told of important transitions (reason, message) for Events on the ModelRecipe.
  std::function<void(const RecipeOwner&, const std::string& type, const std::string& reason,
                     const std::string& message)>
      event;
  int retries = 4;
  std::chrono::milliseconds retry_pause{50};
  // The recipe's engine API key (engine_keys.h): every replica's endpoint carries it for the
  // router and the load scrape. key_secret renders the Secret that brings it to the engine
  // pods; it is created before the Deployment is applied, and again (a 409 when it exists)
  // every key_secret_period, so one deleted by hand comes back. Never updated or read back.
  // Unset: engines get no key.
  std::function<std::string(const std::string& recipe)> engine_key;
  std::function<nlohmann::json(const reconcile::DesiredState&, const RecipeOwner&,
                               const std::string& key)>
      key_secret;
  std::chrono::seconds key_secret_period{60};
};

class KubeReplicaBackend : public reconcile::ReplicaBackend {
 public:
  // The informers watch the namespace's Deployments and Pods that carry recipe_label.
  KubeReplicaBackend(const KubeClient& client, const Informer& deployments, const Informer& pods,
                     KubeReplicaBackendConfig config);

  reconcile::RecipeObservation sync(const reconcile::DesiredState& desired,
                                    reconcile::Clock::time_point now) override;
  reconcile::RecipeObservation drain(const std::string& recipe,
                                     reconcile::Clock::time_point now) override;
  std::vector<reconcile::ReplicaView> replicas(const std::string& recipe) const override;
  std::vector<std::string> recipes() const override;

  int applies() const { return applies_; }  // objects applied so far (tests, logs)

 private:
  std::vector<nlohmann::json> pods_of(const std::string& recipe) const;
  void apply_object(const nlohmann::json& object);
  void ensure_key_secret(const reconcile::DesiredState& desired, const RecipeOwner& owner,
                         const std::string& key, reconcile::Clock::time_point now);
  // `owner`: where Events about failing pods go (none while draining).
  reconcile::RecipeObservation observe(const std::string& recipe, const RecipeOwner* owner);

  const KubeClient& client_;
  const Informer& deployments_;
  const Informer& pods_;
  KubeReplicaBackendConfig config_;
  std::map<std::string, std::string> applied_;  // recipe → rendered objects last applied
  std::map<std::string, int> replicas_applied_;
  std::map<std::string, reconcile::Clock::time_point> key_secret_ensured_;
  // By recipe, then pod name: the engine's restartCount last read (restarts since are counted
  // as `restarted`) and the failure last reported in an Event (one Event per new failure).
  std::map<std::string, std::map<std::string, int>> restart_counts_;
  std::map<std::string, std::map<std::string, std::string>> failures_reported_;
  mutable std::mutex mutex_;  // guards observed_ and keys_ (replicas() may come from an API thread)
  std::map<std::string, std::string> keys_;  // recipe → engine key
  std::map<std::string, std::vector<reconcile::ReplicaView>> observed_;
  int applies_ = 0;
};

// Runs `call`, retrying a 409 Conflict or a transient failure `retries` times with a pause
// doubling from `pause`; rethrows the last error.
void retry_conflicts(const std::function<void()>& call, int retries,
                     std::chrono::milliseconds pause);

}  // namespace nibble::kube
