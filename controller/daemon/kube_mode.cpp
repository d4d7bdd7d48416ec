#include "controller/daemon/kube_mode.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

namespace nibble::controller {

namespace {

// The pod name (HOSTNAME in a pod) and a random suffix: unique per candidate even when two
// controllers share a host.
std::string candidate_identity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::random_device random;
  return std::string(host) + "_" + std::to_string(random() % 100000);
}

// The controller's own namespace (POD_NAMESPACE in the install's pod): its Lease and the seed
// of the engines' keys live there, whichever namespace it watches.
std::string own_namespace(const std::string& watched) {
  const char* pod = std::getenv("POD_NAMESPACE");
  return pod != nullptr && *pod != '\0' ? pod : watched;
}

}  // namespace

KubeMode::KubeMode(const ControllerOptions& o) : render_(o.render) {
  kube::KubeConfig config = kube::resolve_kube_config(o.kubeconfig, kube::process_environment());
  if (!o.namespace_name.empty()) config.namespace_name = o.namespace_name;
  render_.namespace_name = config.namespace_name;
  if (!o.engine_image.empty()) render_.image = o.engine_image;
  client_ = std::make_unique<kube::KubeClient>(std::move(config));

  kube::KubeControllerConfig cc;
  cc.namespace_name = render_.namespace_name;
  cc.recipe_label = kube::kRecipeLabel;
  cc.leader_elect = o.leader_elect;
  cc.election.identity = candidate_identity();
  cc.election.namespace_name = own_namespace(render_.namespace_name);
  cc.pod_selector = kube::pod_selector;
  cc.model_root = o.model_root;
  controller_ = std::make_unique<kube::KubeController>(*client_, cc);
  engine_keys_ = std::make_unique<kube::EngineKeys>(*client_, cc.election.namespace_name);

  kube::KubeReplicaBackendConfig bc;
  bc.namespace_name = render_.namespace_name;
  bc.recipe_label = kube::kRecipeLabel;
  bc.pods.revision_label = kube::kRevisionLabel;
  bc.pods.engine_port = kube::kEnginePort;
  bc.render = [this](const reconcile::DesiredState& d, const kube::RecipeOwner& owner) {
    return kube::recipe_objects(d.recipe, d.revision, d.replicas, kube::Owner{owner.uid}, render_)
        .all();
  };
  bc.owner = [this](const std::string& recipe) { return controller_->owner(recipe); };
  bc.engine_key = [this](const std::string& recipe) {
    return engine_keys_->key_for(render_.namespace_name, recipe);
  };
  bc.key_secret = [this](const reconcile::DesiredState& d, const kube::RecipeOwner& owner,
                         const std::string& key) {
    return kube::engine_key_secret(d.recipe, key, kube::Owner{owner.uid}, render_);
  };
  bc.event = [this](const kube::RecipeOwner& owner, const std::string& type,
                    const std::string& reason, const std::string& message) {
    controller_->record_event(owner, type, reason, message);
  };
  backend_ = std::make_unique<kube::KubeReplicaBackend>(*client_, controller_->deployments(),
                                                        controller_->pods(), bc);
}

}  // namespace nibble::controller
