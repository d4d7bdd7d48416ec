// The Kubernetes backend end to end against the API-server double: the real reconcile loop,
// recipe store, autoscaler and router table behind KubeController and KubeReplicaBackend.
// The tests play the Deployment controller and the kubelet by writing Pods themselves.
#include <gtest/gtest.h>

#include <thread>

#include "controller/kube/kube_controller.h"
#include "controller/kube/kube_replica_backend.h"
#include "controller/kube/recipe_objects.h"
#include "controller/kube/resource_path.h"
#include "controller/loop/controller_loop.h"
#include "metrics/registry.h"
#include "tests/controller/kube/fake_api_server.h"
#include "tests/controller/kube/install_rbac.h"
#include "tests/support/temp_dir.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kRecipes = "/apis/nibble.dev/v1alpha1/modelrecipes";
constexpr const char* kDeployments = "/apis/apps/v1/deployments";
constexpr const char* kServices = "/api/v1/services";
constexpr const char* kPods = "/api/v1/pods";

// A stand-in for the recipe → objects function (controller/kube/recipe_objects.*): enough of
// a Deployment and a Service to carry what this backend reads and writes.
std::vector<Json> render(const reconcile::DesiredState& d, const RecipeOwner& owner) {
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

Json recipe(const std::string& name, int max_num_seqs = 64) {
  return {{"apiVersion", "nibble.dev/v1alpha1"},
          {"kind", "ModelRecipe"},
          {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"spec",
           {{"model", {{"source", "file:///models/" + name}}},
            {"engine", {{"maxNumSeqs", max_num_seqs}}},
            {"replicas", {{"min", 1}, {"max", 1}}}}}};
}

template <typename Pred>
bool eventually(Pred pred, milliseconds limit = milliseconds(8000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

using Renderer =
    std::function<std::vector<Json>(const reconcile::DesiredState&, const RecipeOwner&)>;

// One nibble-controller replica in Kubernetes mode, wired as the daemon wires it.
struct ControllerReplica {
  ControllerReplica(const std::string& server, const std::string& agent, bool leader_elect,
                    Renderer renderer = render)
      : client(KubeConfig{server},
               KubeClientOptions{std::chrono::seconds(2), std::chrono::seconds(5), agent}),
        store(dir.path()),
        controller(client, store, controller_config(agent, leader_elect)),
        backend(client, controller.deployments(), controller.pods(),
                backend_config(std::move(renderer))),
        models(dir.path() / "cache", {}),
        loop(loop_config(), store, backend, models, routes, registry,
             [](const std::string&) { return controller::RouterLoad{}; }) {}

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
  KubeReplicaBackendConfig backend_config(Renderer renderer) {
    KubeReplicaBackendConfig c;
    c.namespace_name = "ns";
    c.render = std::move(renderer);
    c.owner = [this](const std::string& name) { return controller.owner(name); };
    c.event = [this](const RecipeOwner& o, const std::string& type, const std::string& reason,
                     const std::string& message) {
      controller.record_event(o, type, reason, message);
    };
    c.retry_pause = milliseconds(5);
    return c;
  }
  controller::ControllerLoopConfig loop_config() {
    controller::ControllerLoopConfig c;
    c.state_dir = dir.path();
    c.resync = milliseconds(100);
    c.endpoint = "http://router.ns:8000/v1";
    c.resolve_models = false;
    c.status_changed = [this](const controller::RecipeStatus& s) { controller.status_changed(s); };
    return c;
  }
  void start() {
    controller.start([this](const std::atomic<bool>& stop) { loop.run(stop); },
                     [this] { loop.wake(); });
  }
  ~ControllerReplica() { controller.stop(); }

  nibble::testing::TempDir dir;
  KubeClient client;
  store::RecipeStore store;
  KubeController controller;
  KubeReplicaBackend backend;
  controller::ModelResolver models;
  router::RouteTable routes;
  metrics::Registry registry;
  controller::ControllerLoop loop;
};

std::optional<Json> get(const testing::FakeApiServer& s, const char* type,
                        const std::string& name) {
  return s.object(type, "ns", name);
}

Json ready_pod(const std::string& name, const std::string& recipe, const std::string& revision,
               const std::string& ip) {
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

std::string condition(const Json& recipe, const std::string& type) {
  for (const Json& c : recipe.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") + "/" + c.value("reason", "");
  }
  return "";
}

TEST(KubeBackend, RecipeBecomesOwnedObjectsStatusFollowsPodsAndSpecChangesReapply) {
  testing::FakeApiServer server;
  testing::enforce_install_rbac(server, "ctl");
  server.start();
  const Json created = server.put_object(kRecipes, recipe("qwen"));
  const std::string uid = created["metadata"]["uid"];
  ControllerReplica c(server.url(), "ctl", false);
  c.start();

  ASSERT_TRUE(eventually(
      [&] { return get(server, kDeployments, "qwen") && get(server, kServices, "qwen"); }));
  Json deployment = *get(server, kDeployments, "qwen");
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["uid"], uid);
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["kind"], "ModelRecipe");
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ((*get(server, kServices, "qwen"))["metadata"]["ownerReferences"][0]["uid"], uid);
  EXPECT_EQ(deployment["spec"]["replicas"], 1);
  const std::string revision =
      deployment["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"];

  // No pod yet: the status says so, for generation 1.
  ASSERT_TRUE(eventually([&] {
    const Json r = *get(server, kRecipes, "qwen");
    return r.contains("status") && r["status"].value("observedGeneration", 0) == 1 &&
           condition(r, "Ready").rfind("False", 0) == 0;
  }));
  // The kubelet reports a ready pod: readyReplicas, Ready, and the router gets the pod IP.
  server.put_object(kPods, ready_pod("qwen-7d9f-abcde", "qwen", revision, "10.1.2.3"));
  ASSERT_TRUE(eventually([&] {
    const Json r = *get(server, kRecipes, "qwen");
    return r["status"].value("readyReplicas", 0) == 1 &&
           condition(r, "Ready") == "True/ReplicasAvailable";
  })) << get(server, kRecipes, "qwen")->dump();
  const Json status = (*get(server, kRecipes, "qwen"))["status"];
  EXPECT_EQ(status["replicas"], 1);
  EXPECT_EQ(status["endpoint"], "http://router.ns:8000/v1");
  EXPECT_EQ(status["phase"], "Ready");
  const auto route = c.routes.find_by_recipe("qwen");
  ASSERT_TRUE(route.has_value());
  ASSERT_EQ(route->ready.size(), 1u);
  EXPECT_EQ(route->ready[0].host, "10.1.2.3");
  EXPECT_EQ(route->ready[0].port, 8000);
  // Events went out for the first apply.
  bool applied_event = false;
  for (const Json& e : server.objects("/api/v1/events", "ns")) {
    applied_event |= e["reason"] == "Applied" && e["involvedObject"]["uid"] == uid;
  }
  EXPECT_TRUE(applied_event);

  // A spec change (through the API, so generation 2) is applied as a new revision.
  const int applies = server.count_requests("PATCH", "/deployments/qwen");
  KubeClient user(KubeConfig{server.url()});
  user.merge_patch(object_path(kModelRecipes, "ns", "qwen"),
                   {{"spec", {{"engine", {{"maxNumSeqs", 32}}}}}});
  ASSERT_TRUE(eventually([&] {
    const Json d = *get(server, kDeployments, "qwen");
    return d["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"] != revision;
  }));
  EXPECT_GT(server.count_requests("PATCH", "/deployments/qwen"), applies);
  EXPECT_EQ(
      (*get(server, kDeployments, "qwen"))["spec"]["template"]["spec"]["containers"][0]["args"][1],
      "32");
  ASSERT_TRUE(eventually([&] {
    return (*get(server, kRecipes, "qwen"))["status"].value("observedGeneration", 0) == 2;
  }));
  // The old revision's pod is no longer up to date: Progressing with a rolling update.
  EXPECT_TRUE(eventually([&] {
    return condition(*get(server, kRecipes, "qwen"), "Progressing").rfind("True", 0) == 0;
  }));

  // A level-triggered pass does not re-apply unchanged objects.
  const int settled = server.count_requests("PATCH", "/deployments/qwen");
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(server.count_requests("PATCH", "/deployments/qwen"), settled);

  // Deleting the recipe garbage-collects its objects (owner references).
  server.delete_object(kRecipes, "ns", "qwen");
  EXPECT_FALSE(get(server, kDeployments, "qwen").has_value());
  EXPECT_FALSE(get(server, kServices, "qwen").has_value());
}

TEST(KubeBackend, DroppedWatchGoneAndFailedWritesLoseNothing) {
  testing::FakeApiServer server;
  testing::enforce_install_rbac(server, "ctl");
  server.start();
  server.put_object(kRecipes, recipe("a"));
  ControllerReplica c(server.url(), "ctl", false);
  c.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeployments, "a").has_value(); }));

  // While no watch can be opened, b is created and a deleted, and the history is compacted:
  // the resumed watch gets 410 and the re-list finds both changes.
  server.fail_next("GET", "/modelrecipes", 500, 1000000);
  server.drop_watches();
  server.put_object(kRecipes, recipe("b"));
  server.delete_object(kRecipes, "ns", "a");
  // Writes for b fail first: the apply with 500s, the status with 409s; both are retried.
  server.fail_next("PATCH", "/deployments/b", 500, 3);
  server.fail_next("PATCH", "/modelrecipes/b/status", 409, 3);
  server.compact();
  std::this_thread::sleep_for(milliseconds(100));
  server.clear_faults();
  server.fail_next("PATCH", "/deployments/b", 500, 3);
  server.fail_next("PATCH", "/modelrecipes/b/status", 409, 3);

  ASSERT_TRUE(eventually([&] { return get(server, kDeployments, "b").has_value(); }));
  EXPECT_GE(server.count_requests("PATCH", "/deployments/b"), 4);  // 3 failures, then applied
  ASSERT_TRUE(eventually([&] {
    const auto r = get(server, kRecipes, "b");
    return r && r->contains("status") && (*r)["status"].value("observedGeneration", 0) == 1;
  }));
  EXPECT_GE(server.count_requests("PATCH", "/modelrecipes/b/status"), 4);
  EXPECT_FALSE(get(server, kDeployments, "a").has_value());  // collected with its recipe
  // The store follows the cluster: a is gone from it, b is there.
  EXPECT_TRUE(eventually([&] { return c.store.read("a").empty() && !c.store.read("b").empty(); }));

  // A Deployment deleted behind our back is applied again.
  server.delete_object(kDeployments, "ns", "b");
  EXPECT_TRUE(eventually([&] { return get(server, kDeployments, "b").has_value(); }));
}

TEST(KubeBackend, TwoControllersOnlyTheLeaderReconcilesAndTheOtherTakesOverAfterExpiry) {
  testing::FakeApiServer server;
  testing::enforce_install_rbac(server, "ctl");
  server.start();
  server.put_object(kRecipes, recipe("m"));
  ControllerReplica first(server.url(), "ctl-first", true);
  first.start();
  ASSERT_TRUE(eventually([&] { return first.controller.leading(); }));
  ControllerReplica second(server.url(), "ctl-second", true);
  second.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeployments, "m").has_value(); }));
  std::this_thread::sleep_for(milliseconds(1200));  // longer than the lease
  EXPECT_TRUE(first.controller.leading());
  EXPECT_FALSE(second.controller.leading());
  EXPECT_EQ(server.count_requests("PATCH", "/deployments/", "ctl-second"), 0);
  EXPECT_EQ(server.count_requests("PATCH", "/modelrecipes/", "ctl-second"), 0);
  EXPECT_EQ(second.controller.status_writes(), 0);

  // The leader loses the API server entirely; the other takes over once the lease expires,
  // and reconciles a change made meanwhile.
  for (const char* method : {"GET", "PUT", "PATCH", "POST"}) {
    server.fail_next(method, "/", 503, 1000000, "ctl-first");
  }
  const auto lost = std::chrono::steady_clock::now();
  KubeClient user(KubeConfig{server.url()});
  user.merge_patch(object_path(kModelRecipes, "ns", "m"),
                   {{"spec", {{"engine", {{"maxNumSeqs", 16}}}}}});
  ASSERT_TRUE(eventually([&] { return second.controller.leading(); }));
  EXPECT_GE(std::chrono::steady_clock::now() - lost, milliseconds(900));
  EXPECT_FALSE(first.controller.leading());
  ASSERT_TRUE(eventually([&] {
    return (*get(server, kDeployments,
                 "m"))["spec"]["template"]["spec"]["containers"][0]["args"][1] == "16";
  }));
  EXPECT_GT(server.count_requests("PATCH", "/deployments/m", "ctl-second"), 0);
  EXPECT_TRUE(eventually(
      [&] { return (*get(server, kRecipes, "m"))["status"].value("observedGeneration", 0) == 2; }));
  const Json lease =
      *server.object("/apis/coordination.k8s.io/v1/leases", "ns", "nibble-controller");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "ctl-second");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
}

// Every call the controller makes (leader election, informers, server-side applies that create
// and update the daemon's Deployment and Service, status, events, and the scale-down on drain)
// is granted by the install's RBAC, and the RBAC grants nothing else: a missing verb is an
// outage in a cluster, an extra one more privilege than needed.
TEST(KubeBackend, InstallRbacGrantsExactlyWhatTheControllerCalls) {
  testing::FakeApiServer server;
  testing::enforce_install_rbac(server, "ctl");
  server.start();
  server.put_object(kRecipes, recipe("r"));
  // The daemon's objects (controller/daemon/kube_mode.cpp renders them so), but unowned (no
  // uid), so that deleting the recipe leaves the Deployment for drain to scale down.
  const Renderer daemon_objects_unowned = [](const reconcile::DesiredState& d,
                                             const RecipeOwner& owner) {
    RenderOptions options;
    options.namespace_name = owner.namespace_name;
    return recipe_objects(d.recipe, d.revision, d.replicas, Owner{}, options).all();
  };
  ControllerReplica c(server.url(), "ctl", true, daemon_objects_unowned);
  c.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeployments, "r").has_value(); }));
  const std::string revision = (*get(
      server, kDeployments, "r"))["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"];
  server.put_object(kPods, ready_pod("r-1", "r", revision, "10.1.2.3"));
  ASSERT_TRUE(eventually(
      [&] { return condition(*get(server, kRecipes, "r"), "Ready") == "True/ReplicasAvailable"; }));
  // The scale subresource: status.selector selects exactly the Deployment's pods, and
  // spec.replicas.desired (what kubectl scale writes) is held, clamped, autoscaler aside.
  const Json deployment = *get(server, kDeployments, "r");
  const Json status = (*get(server, kRecipes, "r"))["status"];
  EXPECT_EQ(status["selector"], "app.kubernetes.io/name=nibble-engine,nibble.dev/recipe=r");
  EXPECT_EQ(status["replicas"], 1);
  for (const auto& [k, v] : deployment["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_NE(status["selector"].get<std::string>().find(k + "=" + v.get<std::string>()),
              std::string::npos);
    EXPECT_EQ(deployment["spec"]["template"]["metadata"]["labels"][k], v);
  }
  KubeClient user(KubeConfig{server.url()});
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec", {{"replicas", {{"min", 1}, {"max", 3}, {"desired", 2}}}}}});
  EXPECT_TRUE(eventually([&] {
    return (*get(server, kDeployments, "r"))["spec"]["replicas"] == 2;
  })) << get(server, kDeployments, "r")->dump();
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec", {{"replicas", {{"desired", 7}}}}}});
  EXPECT_TRUE(
      eventually([&] { return (*get(server, kDeployments, "r"))["spec"]["replicas"] == 3; }));
  EXPECT_TRUE(eventually([&] {
    return (*get(server, kRecipes, "r"))["status"].value("autoscaler", "").find("stands aside") !=
           std::string::npos;
  })) << get(server, kRecipes, "r")->dump();
  // A spec change re-applies objects that exist (patch without create).
  const int applies = server.count_requests("PATCH", "/deployments/r");
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec", {{"engine", {{"maxNumSeqs", 16}}}}}});
  ASSERT_TRUE(
      eventually([&] { return server.count_requests("PATCH", "/deployments/r") > applies; }));
  server.delete_object(kRecipes, "ns", "r");
  ASSERT_TRUE(eventually([&] {
    return (*get(server, kDeployments, "r"))["spec"]["replicas"] == 0;
  })) << get(server, kDeployments, "r")->dump();
  ASSERT_TRUE(eventually([&] {
    return server.accesses("ctl").contains({"coordination.k8s.io", "leases", "update"});
  }));

  std::set<testing::FakeApiServer::Access> granted = testing::install_rbac_grants();
  // Not a request the controller makes: admission (OwnerReferencesPermissionEnforcement)
  // requires it of whoever sets blockOwnerDeletion on an owner reference to a ModelRecipe,
  // which recipe_objects does.
  EXPECT_EQ(granted.erase({"nibble.dev", "modelrecipes/finalizers", "update"}), 1u);
  EXPECT_EQ(server.accesses("ctl"), granted);
}

}  // namespace
}  // namespace nibble::kube
