#include "controller/kube/kube_controller.h"

#include <spdlog/spdlog.h>

#include "controller/kube/resource_path.h"

namespace nibble::kube {

using Json = nlohmann::json;

KubeController::KubeController(const KubeClient& client, KubeControllerConfig config)
    : client_(client), config_(std::move(config)), queue_(config_.queue) {
  if (config_.election.namespace_name.empty()) {
    config_.election.namespace_name = config_.namespace_name;
  }
  InformerOptions owned = config_.informer;
  owned.label_selector = config_.recipe_label;  // exists
  recipes_ = std::make_unique<Informer>(
      client_, collection_path(kModelRecipes, config_.namespace_name), config_.informer,
      [this](const ObjectChange& c) { on_change(c, true); });
  owned.jitter_seed = config_.informer.jitter_seed + 1;
  deployments_ =
      std::make_unique<Informer>(client_, collection_path(kDeployments, config_.namespace_name),
                                 owned, [this](const ObjectChange& c) { on_change(c, false); });
  owned.jitter_seed = config_.informer.jitter_seed + 2;
  pods_ = std::make_unique<Informer>(client_, collection_path(kPods, config_.namespace_name), owned,
                                     [this](const ObjectChange& c) { on_change(c, false); });
  store_ =
      std::make_unique<InformerRecipeStore>(*recipes_, config_.namespace_name, config_.model_root);
  if (config_.leader_elect) elector_ = std::make_unique<LeaderElector>(client_, config_.election);
}

KubeController::~KubeController() {
  stop();
}

void KubeController::on_change(const ObjectChange& change, bool is_recipe) {
  if (is_recipe) {
    queue_.add(change.key);
    return;
  }
  // An owned object changed: its recipe's key (readiness, a deleted Deployment to re-apply).
  const Json labels = change.object["metadata"].value("labels", Json::object());
  const std::string recipe = labels.value(config_.recipe_label, "");
  if (!recipe.empty()) queue_.add(object_key(config_.namespace_name, recipe));
}

std::optional<RecipeOwner> KubeController::owner(const std::string& recipe) const {
  const std::optional<Json> object = recipes_->get(object_key(config_.namespace_name, recipe));
  if (!object) return std::nullopt;
  return RecipeOwner{config_.namespace_name, recipe, (*object)["metadata"].value("uid", "")};
}

void KubeController::record_event(const RecipeOwner& owner, const std::string& type,
                                  const std::string& reason, const std::string& message) {
  const std::string now = micro_time_now();
  const std::string seconds = now.substr(0, 19) + "Z";  // metav1.Time has no fraction
  const Json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", owner.name + "."}, {"namespace", owner.namespace_name}}},
      {"involvedObject",
       {{"apiVersion", "nibble.dev/v1alpha1"},
        {"kind", "ModelRecipe"},
        {"name", owner.name},
        {"namespace", owner.namespace_name},
        {"uid", owner.uid}}},
      {"type", type},
      {"reason", reason},
      {"message", message},
      {"source", {{"component", "nibble-controller"}}},
      {"reportingComponent", "nibble-controller"},
      {"firstTimestamp", seconds},
      {"lastTimestamp", seconds},
      {"count", 1}};
  try {
    client_.create(collection_path(kEvents, owner.namespace_name), event);
  } catch (const KubeError& e) {
    spdlog::warn("event {} on {}: {}", reason, owner.name, e.what());
  }
}

void KubeController::status_changed(const controller::RecipeStatus& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Json crd = controller::to_crd_status(status);
    // The loop's generations are the API server's (metadata.generation, through the store):
    // observedGeneration is the generation whose spec runs; none before a valid one ran.
    if (status.observed_generation <= 0) {
      crd.erase("observedGeneration");
      for (Json& c : crd["conditions"]) c.erase("observedGeneration");
    }
    crd["selector"] = config_.pod_selector ? config_.pod_selector(status.name)
                                           : config_.recipe_label + "=" + status.name;
    pending_status_[status.name] = std::move(crd);
  }
  queue_.add(object_key(config_.namespace_name, status.name));
}

void KubeController::write_scale(const std::string& recipe, int replicas) {
  const std::string& ns = config_.namespace_name;
  const std::optional<Json> object = recipes_->get(object_key(ns, recipe));
  if (!object) throw KubeError(404, "NotFound", "ModelRecipe " + recipe + " is not in the cache");
  const std::string path = object_path(kModelRecipes, ns, recipe, "scale");
  const auto scale = [&](const Json& read) {
    return Json{{"apiVersion", "autoscaling/v1"},
                {"kind", "Scale"},
                {"metadata",
                 {{"name", recipe},
                  {"namespace", ns},
                  {"resourceVersion", read["metadata"].value("resourceVersion", "")}}},
                {"spec", {{"replicas", replicas}}}};
  };
  try {
    client_.replace(path, scale(*object));
  } catch (const KubeError& e) {
    if (!e.conflict()) throw;
    client_.replace(path, scale(client_.get(path)));
  }
}

void KubeController::sync_key(const std::string& key) {
  const auto [ns, name] = split_key(key);
  const std::optional<Json> object = recipes_->get(key);
  bool spec_changed = false;
  if (!object) {
    // Deleted: its objects are garbage-collected; the loop drains what is left and forgets it.
    std::lock_guard<std::mutex> lock(mutex_);
    spec_changed = seen_spec_.erase(name) > 0;
    pending_status_.erase(name);
    written_status_.erase(name);
  } else {
    // The loop reads the cache itself (store()); a changed spec only wakes it, and an invalid
    // one is also reported as an Event once per spec.
    const std::string doc = recipe_document(*object);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::string& seen = seen_spec_[name];
      spec_changed = seen != doc;
      seen = doc;
    }
    if (spec_changed) {
      const recipe::ParseResult parsed = store_->validate(doc);
      if (!parsed.ok()) {
        spdlog::warn("ModelRecipe {}: invalid, keeping the last valid spec:\n{}", key,
                     parsed.error_text());
        if (leading_) {
          record_event({ns, name, (*object)["metadata"].value("uid", "")}, "Warning", "InvalidSpec",
                       parsed.error_text());
        }
      }
    }
  }
  if (spec_changed && wake_) wake_();

  // The latest status, written only by the leader, only when it changed.
  if (!leading_ || !object) return;
  Json status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = pending_status_.find(name);
    if (it == pending_status_.end()) return;
    status = it->second;
  }
  const std::string text = status.dump();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (written_status_[name] == text) return;
  }
  // A merge patch carries no resourceVersion: the status is ours alone, and a 409 can only be
  // a transient API server answer, retried like any failure.
  retry_conflicts(
      [&] {
        client_.merge_patch(object_path(kModelRecipes, ns, name, "status"), {{"status", status}});
      },
      2, std::chrono::milliseconds(20));
  ++status_writes_;
  std::lock_guard<std::mutex> lock(mutex_);
  written_status_[name] = text;
}

void KubeController::work() {
  while (const std::optional<std::string> key = queue_.get()) {
    try {
      sync_key(*key);
      queue_.forget(*key);
    } catch (const std::exception& e) {
      spdlog::warn("sync {}: {}; retrying in {} ms", *key, e.what(),
                   queue_.next_delay(*key).count());
      queue_.add_rate_limited(*key);
    }
    queue_.done(*key);
  }
}

void KubeController::resync_all() {
  for (const std::string& key : recipes_->keys()) queue_.add(key);
}

void KubeController::start_leading() {
  std::lock_guard<std::mutex> lock(lead_mutex_);
  if (lead_thread_.joinable()) return;
  leading_ = true;
  lead_stop_ = false;
  {
    std::lock_guard<std::mutex> status_lock(mutex_);
    written_status_.clear();  // another leader may have written since
  }
  lead_thread_ = std::thread([this] {
    // As controller-runtime's WaitForCacheSync: a pass over an empty cache would take every
    // recipe for deleted and drain it.
    while (!lead_stop_ && !(recipes_->synced() && deployments_->synced() && pods_->synced())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!lead_stop_) lead_(lead_stop_);
  });
  resync_all();
}

void KubeController::stop_leading() {
  std::lock_guard<std::mutex> lock(lead_mutex_);
  leading_ = false;
  lead_stop_ = true;
  if (wake_) wake_();
  if (lead_thread_.joinable()) lead_thread_.join();
}

void KubeController::start(std::function<void(const std::atomic<bool>&)> lead,
                           std::function<void()> wake) {
  lead_ = std::move(lead);
  wake_ = std::move(wake);
  for (Informer* informer : {recipes_.get(), deployments_.get(), pods_.get()}) {
    threads_.emplace_back([informer] { informer->run(); });
  }
  threads_.emplace_back([this] { work(); });
  threads_.emplace_back([this] {  // periodic resync: level-triggered safety net
    while (!stopping_) {
      for (auto waited = std::chrono::milliseconds(0); waited < config_.resync && !stopping_;
           waited += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!stopping_) resync_all();
    }
  });
  if (elector_) {
    threads_.emplace_back(
        [this] { elector_->run([this] { start_leading(); }, [this] { stop_leading(); }); });
  } else {
    start_leading();
  }
}

void KubeController::stop() {
  if (stopping_.exchange(true)) return;
  if (elector_) elector_->stop();
  for (Informer* informer : {recipes_.get(), deployments_.get(), pods_.get()}) informer->stop();
  queue_.shut_down();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  stop_leading();
  if (elector_) elector_->release();
}

}  // namespace nibble::kube
