#include "controller/kube/kube_replica_backend.h"

#include <spdlog/spdlog.h>

#include <set>
#include <thread>

#include "controller/kube/resource_path.h"

namespace nibble::kube {

using Json = nlohmann::json;

namespace {

// The API type of a rendered object, from its apiVersion and kind.
const ResourceType& type_of(const Json& object) {
  const std::string api_version = object.value("apiVersion", "");
  const std::string kind = object.value("kind", "");
  for (const ResourceType* t : {&kDeployments, &kServices, &kPodDisruptionBudgets, &kPodMonitors}) {
    if (t->api_version() == api_version && t->kind == kind) return *t;
  }
  throw KubeError(0, "UnknownKind", "cannot apply " + api_version + " " + kind);
}

}  // namespace

Json RecipeOwner::reference() const {
  return {{"apiVersion", "nibble.dev/v1alpha1"},
          {"kind", "ModelRecipe"},
          {"name", name},
          {"uid", uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

void retry_conflicts(const std::function<void()>& call, int retries,
                     std::chrono::milliseconds pause) {
  for (int attempt = 0;; ++attempt) {
    try {
      call();
      return;
    } catch (const KubeError& e) {
      if (attempt >= retries || !(e.conflict() || e.transient())) throw;
      spdlog::debug("retrying after {} (attempt {})", e.what(), attempt + 1);
      std::this_thread::sleep_for(pause);
      pause *= 2;
    }
  }
}

KubeReplicaBackend::KubeReplicaBackend(const KubeClient& client, const Informer& deployments,
                                       const Informer& pods, KubeReplicaBackendConfig config)
    : client_(client), deployments_(deployments), pods_(pods), config_(std::move(config)) {}

void KubeReplicaBackend::apply_object(const Json& object) {
  const ResourceType& type = type_of(object);
  const std::string path =
      object_path(type, config_.namespace_name, object["metadata"].value("name", ""));
  retry_conflicts([&] { client_.apply(path, object); }, config_.retries, config_.retry_pause);
  ++applies_;
}

std::vector<Json> KubeReplicaBackend::pods_of(const std::string& recipe) const {
  std::vector<Json> out;
  for (Json& pod : pods_.list()) {
    const Json labels = pod["metadata"].value("labels", Json::object());
    if (pod["metadata"].value("namespace", "") == config_.namespace_name &&
        labels.value(config_.recipe_label, "") == recipe) {
      out.push_back(std::move(pod));
    }
  }
  return out;
}

reconcile::RecipeObservation KubeReplicaBackend::observe(const std::string& recipe,
                                                         const RecipeOwner* owner) {
  const std::vector<Json> pods = pods_of(recipe);
  reconcile::RecipeObservation observation = observe_pods(pods, config_.pods);
  // Rebuilt from the pods present, so pods that are gone are forgotten.
  std::map<std::string, int>& counts_before = restart_counts_[recipe];
  std::map<std::string, std::string>& reported_before = failures_reported_[recipe];
  std::map<std::string, int> counts;
  std::map<std::string, std::string> reported;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const reconcile::ReplicaView& view = observation.replicas[i];
    // A pod seen for the first time (or by a restarted controller) sets the baseline.
    const auto before = counts_before.find(view.id);
    if (before != counts_before.end() && view.restarts > before->second)
      observation.restarted += view.restarts - before->second;
    counts[view.id] = view.restarts;
    const PodFailure failure = pod_failure(pods[i]);
    if (!failure.reason.empty() && failure.reason != reported_before[view.id] && owner &&
        config_.event)
      config_.event(*owner, "Warning", failure.reason, failure.message);
    reported[view.id] = failure.reason;
  }
  counts_before = std::move(counts);
  reported_before = std::move(reported);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = keys_.find(recipe);
  if (key != keys_.end()) {
    for (reconcile::ReplicaView& r : observation.replicas) r.endpoint.api_key = key->second;
  }
  observed_[recipe] = observation.replicas;
  return observation;
}

void KubeReplicaBackend::ensure_key_secret(const reconcile::DesiredState& desired,
                                           const RecipeOwner& owner, const std::string& key,
                                           reconcile::Clock::time_point now) {
  const std::string& name = desired.recipe.name;
  const auto last = key_secret_ensured_.find(name);
  if (last != key_secret_ensured_.end() && now - last->second < config_.key_secret_period) return;
  const Json secret = config_.key_secret(desired, owner, key);
  try {
    retry_conflicts(
        [&] {
          try {
            client_.create(collection_path(kSecrets, config_.namespace_name), secret);
            spdlog::info("created Secret {}/{} (the engines' API key of recipe {})",
                         config_.namespace_name, secret["metadata"].value("name", ""), name);
          } catch (const KubeError& e) {
            if (!e.conflict()) throw;  // AlreadyExists: created before, by us or a former leader
          }
        },
        config_.retries, config_.retry_pause);
  } catch (const KubeError& e) {
    throw KubeError(e.status(), e.reason(),
                    std::string("creating the engine key Secret: ") + e.what());
  }
  key_secret_ensured_[name] = now;
}

reconcile::RecipeObservation KubeReplicaBackend::sync(const reconcile::DesiredState& desired,
                                                      reconcile::Clock::time_point now) {
  const std::string& name = desired.recipe.name;
  const std::optional<RecipeOwner> owner = config_.owner(name);
  if (!owner) throw KubeError(404, "NotFound", "ModelRecipe " + name + " is not in the cache");
  if (config_.engine_key) {
    // Before the Deployment: its pods cannot start without the Secret.
    const std::string key = config_.engine_key(name);
    ensure_key_secret(desired, *owner, key, now);
    std::lock_guard<std::mutex> lock(mutex_);
    keys_[name] = key;
  }
  const std::vector<Json> objects = config_.render(desired, *owner);
  if (objects.empty()) throw KubeError(0, "Render", "no objects rendered for " + name);
  const std::string rendered = Json(objects).dump();
  const std::string deployment_key =
      object_key(config_.namespace_name, objects.front()["metadata"].value("name", ""));
  const bool deployment_present = deployments_.get(deployment_key).has_value();
  const auto last = applied_.find(name);
  if (last == applied_.end() || last->second != rendered || !deployment_present) {
    for (const Json& object : objects) apply_object(object);
    const bool created = !deployment_present;
    const bool changed = last != applied_.end() && last->second != rendered;
    applied_[name] = rendered;
    const auto before = replicas_applied_.find(name);
    if (config_.event) {
      if (created) {
        config_.event(*owner, "Normal", "Applied",
                      "created Deployment " + deployment_key + " with " +
                          std::to_string(desired.replicas) + " replicas");
      } else if (before != replicas_applied_.end() && before->second != desired.replicas) {
        config_.event(*owner, "Normal", "Scaled",
                      "scaled Deployment " + deployment_key + " from " +
                          std::to_string(before->second) + " to " +
                          std::to_string(desired.replicas) + " replicas");
      } else if (changed) {
        config_.event(
            *owner, "Normal", "Applied",
            "updated Deployment " + deployment_key + " (revision " + desired.revision + ")");
      }
    }
    replicas_applied_[name] = desired.replicas;
  }
  return observe(name, &*owner);
}

reconcile::RecipeObservation KubeReplicaBackend::drain(const std::string& recipe,
                                                       reconcile::Clock::time_point) {
  applied_.erase(recipe);
  replicas_applied_.erase(recipe);
  key_secret_ensured_.erase(recipe);
  for (const Json& deployment : deployments_.list()) {
    const Json& meta = deployment["metadata"];
    if (meta.value("labels", Json::object()).value(config_.recipe_label, "") != recipe) continue;
    if (deployment["spec"].value("replicas", 0) == 0) continue;
    const std::string path =
        object_path(kDeployments, meta.value("namespace", ""), meta.value("name", ""), "scale");
    try {
      retry_conflicts(
          [&] {
            client_.merge_patch(path, {{"spec", {{"replicas", 0}}}});
          },
          config_.retries, config_.retry_pause);
    } catch (const KubeError& e) {
      if (!e.not_found()) throw;  // already gone: garbage-collected with its recipe
    }
  }
  reconcile::RecipeObservation observation = observe(recipe, nullptr);
  if (observation.replicas.empty()) {
    restart_counts_.erase(recipe);
    failures_reported_.erase(recipe);
    std::lock_guard<std::mutex> lock(mutex_);
    observed_.erase(recipe);
    keys_.erase(recipe);
  }
  return observation;
}

std::vector<reconcile::ReplicaView> KubeReplicaBackend::replicas(const std::string& recipe) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = observed_.find(recipe);
  return it == observed_.end() ? std::vector<reconcile::ReplicaView>{} : it->second;
}

std::vector<std::string> KubeReplicaBackend::recipes() const {
  std::set<std::string> names;
  for (const Json& pod : pods_.list()) {
    const std::string r =
        pod["metadata"].value("labels", Json::object()).value(config_.recipe_label, "");
    if (!r.empty()) names.insert(r);
  }
  return {names.begin(), names.end()};
}

}  // namespace nibble::kube
