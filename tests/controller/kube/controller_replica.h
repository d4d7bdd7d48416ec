#pragma once
// One nibble-controller replica in Kubernetes mode against the API-server double, wired as the
// daemon wires it (controller/daemon/kube_mode.cpp, main.cpp): KubeController (and the recipe
// store over its informer's cache), KubeReplicaBackend, the real reconcile loop, autoscaler and
// route table. With helpers the backend
// tests share: a stand-in renderer, recipes, pods, conditions, and polling.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "controller/kube/engine_keys.h"
#include "controller/kube/kube_controller.h"
#include "controller/kube/kube_replica_backend.h"
#include "controller/kube/recipe_objects.h"
#include "controller/kube/resource_path.h"
#include "controller/loop/controller_loop.h"
#include "metrics/registry.h"
#include "tests/controller/kube/eventually.h"
#include "tests/controller/kube/fake_api_server.h"
#include "tests/support/temp_dir.h"

namespace nibble::kube::testing {

using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kRecipesPath = "/apis/nibble.dev/v1alpha1/modelrecipes";
constexpr const char* kDeploymentsPath = "/apis/apps/v1/deployments";
constexpr const char* kServicesPath = "/api/v1/services";
constexpr const char* kPodsPath = "/api/v1/pods";

// A stand-in for the recipe → objects function (controller/kube/recipe_objects.*): enough of
// a Deployment and a Service to carry what this backend reads and writes.
inline std::vector<Json> render(const reconcile::DesiredState& d, const RecipeOwner& owner) {
  const std::string& name = d.recipe.name;
  const Json labels = {{"nibble.dev/recipe", name}};
  Json pod_labels = labels;
  pod_labels["nibble.dev/revision"] = d.revision;
  const Json meta = {{"name", name},
                     {"namespace", owner.namespace_name},
                     {"labels", labels},
                     {"ownerReferences", Json::array({owner.reference()})}};
  return {
      {{"apiVersion", "apps/v1"},
       {"kind", "Deployment"},
       {"metadata", meta},
       {"spec",
        {{"replicas", d.replicas},
         {"selector", {{"matchLabels", labels}}},
         {"template",
          {{"metadata", {{"labels", pod_labels}}},
           {"spec",
            {{"containers",
              Json::array(
                  {{{"name", "engine"},
                    {"image", "nibble-engine"},
                    {"args",
                     {"--max-num-seqs", std::to_string(d.recipe.engine.max_num_seqs)}}}})}}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata", meta},
       {"spec", {{"selector", labels}, {"ports", Json::array({{{"port", 8000}}})}}}}};
}

inline Json recipe(const std::string& name, int max_num_seqs = 64) {
  return {{"apiVersion", "nibble.dev/v1alpha1"},
          {"kind", "ModelRecipe"},
          {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"spec",
           {{"model", {{"source", "file:///models/" + name}}},
            {"engine", {{"maxNumSeqs", max_num_seqs}}},
            {"replicas", {{"min", 1}, {"max", 1}}}}}};
}

using Renderer =
    std::function<std::vector<Json>(const reconcile::DesiredState&, const RecipeOwner&)>;

// One nibble-controller replica in Kubernetes mode, wired as the daemon wires it.
struct ControllerReplica {
  ControllerReplica(const std::string& server, const std::string& agent, bool leader_elect,
                    Renderer renderer = render, PodReading pods = {})
      : client(KubeConfig{server},
               KubeClientOptions{std::chrono::seconds(2), std::chrono::seconds(5), agent}),
        controller(client, controller_config(agent, leader_elect)),
        store(controller.store()),
        engine_keys(client, "ns"),
        backend(client, controller.deployments(), controller.pods(),
                backend_config(std::move(renderer), std::move(pods))),
        models(dir.path() / "cache", {}),
        loop(loop_config(), store, backend, models, routes, registry,
             [this](const std::string& recipe) {
               return router_load ? router_load(recipe) : controller::RouterLoad{};
             }) {}

  KubeControllerConfig controller_config(const std::string& agent, bool leader_elect) {
    KubeControllerConfig c;
    c.namespace_name = "ns";
    c.leader_elect = leader_elect;
    c.election.identity = agent;
    c.election.lease_duration_seconds = 1;
    c.election.renew_deadline = milliseconds(600);
    c.election.retry_period = milliseconds(50);
    c.informer.initial_backoff = milliseconds(10);
    c.informer.max_backoff = milliseconds(50);
    c.queue.base_delay = milliseconds(5);
    c.queue.max_delay = milliseconds(100);
    c.resync = milliseconds(500);
    c.pod_selector = pod_selector;  // as the daemon wires it
    return c;
  }
  KubeReplicaBackendConfig backend_config(Renderer renderer, PodReading pods) {
    KubeReplicaBackendConfig c;
    c.namespace_name = "ns";
    c.render = std::move(renderer);
    c.owner = [this](const std::string& name) { return controller.owner(name); };
    c.event = [this](const RecipeOwner& o, const std::string& type, const std::string& reason,
                     const std::string& message) {
      controller.record_event(o, type, reason, message);
    };
    c.retry_pause = milliseconds(5);
    c.pods = std::move(pods);
    c.engine_key = [this](const std::string& recipe) { return engine_keys.key_for("ns", recipe); };
    c.key_secret = [](const reconcile::DesiredState& d, const RecipeOwner& owner,
                      const std::string& key) {
      RenderOptions options;
      options.namespace_name = owner.namespace_name;
      return engine_key_secret(d.recipe, key, Owner{owner.uid}, options);
    };
    return c;
  }
  controller::ControllerLoopConfig loop_config() {
    controller::ControllerLoopConfig c;
    c.state_dir = dir.path();
    c.resync = milliseconds(100);
    c.endpoint = "http://router.ns:8000/v1";
    c.resolve_models = false;
    c.status_changed = [this](const controller::RecipeStatus& s) { controller.status_changed(s); };
    c.publish_replicas = [this](const std::string& recipe, int replicas) {
      controller.write_scale(recipe, replicas);
    };
    return c;
  }
  void start() {
    controller.start([this](const std::atomic<bool>& stop) { loop.run(stop); },
                     [this] { loop.wake(); });
  }
  ~ControllerReplica() { controller.stop(); }

  // The load the autoscaler sees (set before start(); none by default).
  std::function<controller::RouterLoad(const std::string& recipe)> router_load;
  nibble::testing::TempDir dir;
  KubeClient client;
  KubeController controller;
  store::RecipeStore& store;
  EngineKeys engine_keys;
  KubeReplicaBackend backend;
  controller::ModelResolver models;
  router::RouteTable routes;
  metrics::Registry registry;
  controller::ControllerLoop loop;
};

inline std::optional<Json> get(const testing::FakeApiServer& s, const char* type,
                               const std::string& name) {
  return s.object(type, "ns", name);
}

inline Json ready_pod(const std::string& name, const std::string& recipe,
                      const std::string& revision, const std::string& ip) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "ns"},
            {"labels", {{"nibble.dev/recipe", recipe}, {"nibble.dev/revision", revision}}}}},
          {"status",
           {{"phase", "Running"},
            {"podIP", ip},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
            {"containerStatuses",
             Json::array({{{"name", "engine"}, {"ready", true}, {"restartCount", 0}}})}}}};
}

inline std::string condition(const Json& recipe, const std::string& type) {
  for (const Json& c : recipe.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") + "/" + c.value("reason", "");
  }
  return "";
}

}  // namespace nibble::kube::testing
