// The Kubernetes backend end to end against the API-server double: the real reconcile loop,
// recipe store, autoscaler and router table behind KubeController and KubeReplicaBackend.
// The tests play the Deployment controller and the kubelet by writing Pods themselves.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "tests/controller/kube/controller_replica.h"
#include "tests/controller/kube/install_rbac.h"
#include "tests/controller/kube/installed_api_server.h"

namespace nibble::kube {
namespace {

using namespace testing;
using Json = nlohmann::json;
using std::chrono::milliseconds;

TEST(KubeBackend, RecipeBecomesOwnedObjectsStatusFollowsPodsAndSpecChangesReapply) {
  testing::FakeApiServer server;
  testing::start_as_installed(server);
  const Json created = server.put_object(kRecipesPath, recipe("qwen"));
  const std::string uid = created["metadata"]["uid"];
  ControllerReplica c(server.url(), "ctl", false);
  c.start();

  ASSERT_TRUE(eventually(
      [&] { return get(server, kDeploymentsPath, "qwen") && get(server, kServicesPath, "qwen"); }));
  Json deployment = *get(server, kDeploymentsPath, "qwen");
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["uid"], uid);
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["kind"], "ModelRecipe");
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ((*get(server, kServicesPath, "qwen"))["metadata"]["ownerReferences"][0]["uid"], uid);
  EXPECT_EQ(deployment["spec"]["replicas"], 1);
  const std::string revision =
      deployment["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"];

  // No pod yet: the status says so, for generation 2 (1 + the autoscaler's scale write).
  ASSERT_TRUE(eventually([&] {
    const Json r = *get(server, kRecipesPath, "qwen");
    return r.contains("status") && r["status"].value("observedGeneration", 0) == 2 &&
           condition(r, "Ready").rfind("False", 0) == 0;
  }));
  // The kubelet reports a ready pod: readyReplicas, Ready, and the router gets the pod IP.
  server.put_object(kPodsPath, ready_pod("qwen-7d9f-abcde", "qwen", revision, "10.1.2.3"));
  ASSERT_TRUE(eventually([&] {
    const Json r = *get(server, kRecipesPath, "qwen");
    return r["status"].value("readyReplicas", 0) == 1 &&
           condition(r, "Ready") == "True/ReplicasAvailable";
  })) << get(server, kRecipesPath, "qwen")->dump();
  const Json status = (*get(server, kRecipesPath, "qwen"))["status"];
  EXPECT_EQ(status["replicas"], 1);
  EXPECT_EQ(status["endpoint"], "http://router.ns:8000/v1");
  EXPECT_EQ(status["phase"], "Ready");
  const auto route = c.routes.find_by_recipe("qwen");
  ASSERT_TRUE(route.has_value());
  ASSERT_EQ(route->ready.size(), 1u);
  EXPECT_EQ(route->ready[0].host, "10.1.2.3");
  EXPECT_EQ(route->ready[0].port, 8000);
  // The engine's key: in a Secret owned by the recipe (collected with it), and on the route so
  // the router authenticates to the pod.
  const auto secret = server.object("/api/v1/secrets", "ns", "qwen-engine-key");
  ASSERT_TRUE(secret.has_value());
  EXPECT_EQ((*secret)["metadata"]["ownerReferences"][0]["uid"], uid);
  const std::string key = (*secret)["stringData"]["api-key"];
  EXPECT_EQ(key, c.engine_keys.key_for("ns", "qwen"));
  EXPECT_EQ(route->ready[0].api_key, key);
  // Events went out for the first apply.
  bool applied_event = false;
  for (const Json& e : server.objects("/api/v1/events", "ns")) {
    applied_event |= e["reason"] == "Applied" && e["involvedObject"]["uid"] == uid;
  }
  EXPECT_TRUE(applied_event);

  // A spec change (through the API, so generation 3) is applied as a new revision.
  const int applies = server.count_requests("PATCH", "/deployments/qwen");
  KubeClient user(KubeConfig{server.url()});
  user.merge_patch(object_path(kModelRecipes, "ns", "qwen"),
                   {{"spec", {{"engine", {{"maxNumSeqs", 32}}}}}});
  ASSERT_TRUE(eventually([&] {
    const Json d = *get(server, kDeploymentsPath, "qwen");
    return d["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"] != revision;
  }));
  EXPECT_GT(server.count_requests("PATCH", "/deployments/qwen"), applies);
  EXPECT_EQ((*get(server, kDeploymentsPath,
                  "qwen"))["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "32");
  ASSERT_TRUE(eventually([&] {
    return (*get(server, kRecipesPath, "qwen"))["status"].value("observedGeneration", 0) == 3;
  }));
  // The old revision's pod is no longer up to date: Progressing with a rolling update.
  EXPECT_TRUE(eventually([&] {
    return condition(*get(server, kRecipesPath, "qwen"), "Progressing").rfind("True", 0) == 0;
  }));

  // A level-triggered pass does not re-apply unchanged objects.
  const int settled = server.count_requests("PATCH", "/deployments/qwen");
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(server.count_requests("PATCH", "/deployments/qwen"), settled);

  // Deleting the recipe garbage-collects its objects (owner references).
  server.delete_object(kRecipesPath, "ns", "qwen");
  EXPECT_FALSE(get(server, kDeploymentsPath, "qwen").has_value());
  EXPECT_FALSE(get(server, kServicesPath, "qwen").has_value());
  EXPECT_FALSE(server.object("/api/v1/secrets", "ns", "qwen-engine-key").has_value());
}

// A pod the kubelet reports: its engine restarted `restarts` times, waiting as `waiting`
// (reason "" for running) after an exit `last_exit` ("" for none); `downloading` while its
// model-download init container runs.
Json pod_in_state(const std::string& name, const std::string& revision, int restarts,
                  const std::string& waiting, const std::string& last_exit, bool downloading) {
  Json pod = ready_pod(name, "qwen", revision, "10.1.2.4");
  pod["status"]["conditions"][0]["status"] = "False";
  Json engine = {{"name", "engine"}, {"ready", false}, {"restartCount", restarts}};
  if (!waiting.empty()) engine["state"] = {{"waiting", {{"reason", waiting}}}};
  if (!last_exit.empty())
    engine["lastState"] = {{"terminated", {{"reason", last_exit}, {"exitCode", 137}}}};
  pod["status"]["containerStatuses"] = Json::array({engine});
  if (downloading) {
    pod["status"]["phase"] = "Pending";
    pod["status"]["initContainerStatuses"] = Json::array(
        {{{"name", "model-download"}, {"state", {{"running", {{"startedAt", "now"}}}}}}});
    engine["state"] = {{"waiting", {{"reason", "PodInitializing"}}}};
    pod["status"]["containerStatuses"] = Json::array({engine});
  }
  return pod;
}

// The facts the alerts read, from the pods (issue 43): Downloading while the init container
// fetches the weights (NibbleModelNoReadyReplica excludes it), restarts from restartCount
// (NibbleEngineCrashLooping), and CrashLoopBackOff / OOMKilled / ImagePullBackOff in the
// Degraded condition and as Warning Events.
TEST(KubeBackend, DownloadsRestartsAndCrashLoopsComeFromThePods) {
  testing::FakeApiServer server;
  testing::start_as_installed(server);
  const Json created = server.put_object(kRecipesPath, recipe("qwen"));
  const std::string uid = created["metadata"]["uid"];
  ControllerReplica c(server.url(), "ctl", false);
  c.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "qwen").has_value(); }));
  const std::string revision =
      (*get(server, kDeploymentsPath,
            "qwen"))["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"];
  const auto phase = [&] {
    return (*get(server, kRecipesPath, "qwen"))
        .value("status", Json::object())
        .value("phase", std::string());
  };
  const auto restarts_metric = [&] {
    const std::string page = c.registry.render();
    const std::string series = "nibble_controller_replica_restarts_total{recipe=\"qwen\"} ";
    const auto at = page.find(series);
    return at == std::string::npos ? -1.0 : std::stod(page.substr(at + series.size()));
  };
  const auto event_reasons = [&] {
    std::set<std::string> reasons;
    for (const Json& e : server.objects("/api/v1/events", "ns"))
      if (e["involvedObject"]["uid"] == uid && e["type"] == "Warning") reasons.insert(e["reason"]);
    return reasons;
  };

  server.put_object(kPodsPath, pod_in_state("qwen-1", revision, 0, "", "", true));
  ASSERT_TRUE(eventually([&] { return phase() == "Downloading"; })) << phase();
  EXPECT_EQ(condition(*get(server, kRecipesPath, "qwen"), "Progressing"), "True/Downloading");

  // Downloaded; the engine then runs out of memory three times.
  server.put_object(kPodsPath, pod_in_state("qwen-1", revision, 0, "", "", false));
  ASSERT_TRUE(eventually([&] { return phase() == "Progressing"; })) << phase();
  server.put_object(kPodsPath,
                    pod_in_state("qwen-1", revision, 3, "CrashLoopBackOff", "OOMKilled", false));
  ASSERT_TRUE(eventually([&] { return phase() == "Degraded"; })) << phase();
  const Json r = *get(server, kRecipesPath, "qwen");
  EXPECT_EQ(condition(r, "Degraded"), "True/CrashLoopBackOff");
  EXPECT_NE(r["status"].value("lastError", "").find("OOMKilled (exit code 137)"), std::string::npos)
      << r["status"].dump();
  EXPECT_TRUE(eventually([&] { return restarts_metric() == 3.0; })) << restarts_metric();
  EXPECT_TRUE(eventually([&] { return event_reasons().count("OOMKilled") == 1; }));

  // A new pod whose image cannot be pulled.
  server.put_object(kPodsPath, pod_in_state("qwen-2", revision, 0, "ImagePullBackOff", "", false));
  EXPECT_TRUE(eventually([&] { return event_reasons().count("ImagePullBackOff") == 1; }));
  EXPECT_EQ(restarts_metric(), 3.0);  // a new pod's count is a baseline, not restarts
}

TEST(KubeBackend, DroppedWatchGoneAndFailedWritesLoseNothing) {
  testing::FakeApiServer server;
  testing::start_as_installed(server);
  server.put_object(kRecipesPath, recipe("a"));
  ControllerReplica c(server.url(), "ctl", false);
  c.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "a").has_value(); }));

  // While no watch can be opened, b is created and a deleted, and the history is compacted:
  // the resumed watch gets 410 and the re-list finds both changes.
  server.fail_next("GET", "/modelrecipes", 500, 1000000);
  server.drop_watches();
  server.put_object(kRecipesPath, recipe("b"));
  server.delete_object(kRecipesPath, "ns", "a");
  // Writes for b fail first: the apply with 500s, the status with 409s; both are retried.
  server.fail_next("PATCH", "/deployments/b", 500, 3);
  server.fail_next("PATCH", "/modelrecipes/b/status", 409, 3);
  server.compact();
  std::this_thread::sleep_for(milliseconds(100));
  server.clear_faults();
  server.fail_next("PATCH", "/deployments/b", 500, 3);
  server.fail_next("PATCH", "/modelrecipes/b/status", 409, 3);

  ASSERT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "b").has_value(); }));
  EXPECT_GE(server.count_requests("PATCH", "/deployments/b"), 4);  // 3 failures, then applied
  ASSERT_TRUE(eventually([&] {
    const auto r = get(server, kRecipesPath, "b");
    return r && r->contains("status") && (*r)["status"].value("observedGeneration", 0) == 2;
  }));
  EXPECT_GE(server.count_requests("PATCH", "/modelrecipes/b/status"), 4);
  EXPECT_FALSE(get(server, kDeploymentsPath, "a").has_value());  // collected with its recipe
  // The store follows the cluster: a is gone from it, b is there.
  EXPECT_TRUE(eventually([&] { return c.store.read("a").empty() && !c.store.read("b").empty(); }));

  // A Deployment deleted behind our back is applied again.
  server.delete_object(kDeploymentsPath, "ns", "b");
  EXPECT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "b").has_value(); }));
}

TEST(KubeBackend, TwoControllersOnlyTheLeaderReconcilesAndTheOtherTakesOverAfterExpiry) {
  testing::FakeApiServer server;
  testing::start_as_installed(server);
  server.put_object(kRecipesPath, recipe("m"));
  ControllerReplica first(server.url(), "ctl-first", true);
  first.start();
  ASSERT_TRUE(eventually([&] { return first.controller.leading(); }));
  ControllerReplica second(server.url(), "ctl-second", true);
  second.start();
  ASSERT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "m").has_value(); }));
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
    return (*get(server, kDeploymentsPath,
                 "m"))["spec"]["template"]["spec"]["containers"][0]["args"][1] == "16";
  }));
  EXPECT_GT(server.count_requests("PATCH", "/deployments/m", "ctl-second"), 0);
  EXPECT_TRUE(eventually([&] {
    return (*get(server, kRecipesPath, "m"))["status"].value("observedGeneration", 0) == 3;
  }));
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
  testing::start_as_installed(server);
  server.put_object(kRecipesPath, recipe("r"));
  // The autoscaler's first write of the scale subresource meets a conflict: it reads the Scale
  // again and writes once more (get, update).
  server.fail_next("PUT", "/modelrecipes/r/scale", 409, 1);
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
  ASSERT_TRUE(eventually([&] { return get(server, kDeploymentsPath, "r").has_value(); }));
  const std::string revision =
      (*get(server, kDeploymentsPath,
            "r"))["spec"]["template"]["metadata"]["labels"]["nibble.dev/revision"];
  server.put_object(kPodsPath, ready_pod("r-1", "r", revision, "10.1.2.3"));
  ASSERT_TRUE(eventually([&] {
    return condition(*get(server, kRecipesPath, "r"), "Ready") == "True/ReplicasAvailable";
  }));
  // The autoscaler published its count through the scale subresource.
  EXPECT_EQ((*get(server, kRecipesPath, "r"))["spec"]["replicas"].value("desired", -1), 1);
  EXPECT_EQ(server.count_requests("PUT", "/modelrecipes/r/scale"), 2);
  EXPECT_EQ(server.count_requests("GET", "/modelrecipes/r/scale"), 1);
  // The scale subresource: status.selector selects exactly the Deployment's pods, and with the
  // autoscaler off, spec.replicas.desired (what kubectl scale writes) is held, clamped.
  const Json deployment = *get(server, kDeploymentsPath, "r");
  const Json status = (*get(server, kRecipesPath, "r"))["status"];
  EXPECT_EQ(status["selector"], "app.kubernetes.io/name=nibble-engine,nibble.dev/recipe=r");
  EXPECT_EQ(status["replicas"], 1);
  for (const auto& [k, v] : deployment["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_NE(status["selector"].get<std::string>().find(k + "=" + v.get<std::string>()),
              std::string::npos);
    EXPECT_EQ(deployment["spec"]["template"]["metadata"]["labels"][k], v);
  }
  KubeClient user(KubeConfig{server.url()});
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec",
                     {{"replicas", {{"min", 1}, {"max", 3}, {"desired", 2}}},
                      {"autoscaling", {{"enabled", false}}}}}});
  EXPECT_TRUE(eventually([&] {
    return (*get(server, kDeploymentsPath, "r"))["spec"]["replicas"] == 2;
  })) << get(server, kDeploymentsPath, "r")->dump();
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec", {{"replicas", {{"desired", 7}}}}}});
  EXPECT_TRUE(
      eventually([&] { return (*get(server, kDeploymentsPath, "r"))["spec"]["replicas"] == 3; }));
  EXPECT_TRUE(eventually([&] {
    return (*get(server, kRecipesPath, "r"))["status"]
               .value("autoscaler", "")
               .find("stands aside") != std::string::npos;
  })) << get(server, kRecipesPath, "r")->dump();
  // A spec change re-applies objects that exist (patch without create).
  const int applies = server.count_requests("PATCH", "/deployments/r");
  user.merge_patch(object_path(kModelRecipes, "ns", "r"),
                   {{"spec", {{"engine", {{"maxNumSeqs", 16}}}}}});
  ASSERT_TRUE(
      eventually([&] { return server.count_requests("PATCH", "/deployments/r") > applies; }));
  server.delete_object(kRecipesPath, "ns", "r");
  ASSERT_TRUE(eventually([&] {
    return (*get(server, kDeploymentsPath, "r"))["spec"]["replicas"] == 0;
  })) << get(server, kDeploymentsPath, "r")->dump();
  ASSERT_TRUE(eventually([&] {
    return server.accesses("ctl").contains(
        {"coordination.k8s.io", "leases", "update", "nibble-controller"});
  }));

  std::set<testing::FakeApiServer::Access> granted = testing::install_rbac_grants();
  // Not a request the controller makes: admission (OwnerReferencesPermissionEnforcement)
  // requires it of whoever sets blockOwnerDeletion on an owner reference to a ModelRecipe,
  // which recipe_objects does.
  EXPECT_EQ(granted.erase({"nibble.dev", "modelrecipes/finalizers", "update"}), 1u);
  EXPECT_EQ(rules_used(server.accesses("ctl"), granted), granted);
}

}  // namespace
}  // namespace nibble::kube
