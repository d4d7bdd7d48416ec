// Requests for a recipe scaled to zero, in Kubernetes mode, end to end through the router: the
// router holds the request and wakes the loop, the autoscaler publishes one replica through the
// ModelRecipe's scale subresource, the Deployment follows spec.replicas.desired, the Deployment
// controller and kubelet (played by FakeDeploymentController) make a Pod that turns Ready, and
// the held request goes through to it. A Pod that never turns Ready bounds the wait: 503 with
// Retry-After once the router's hold timeout has passed.
#include <gtest/gtest.h>
#include <httplib.h>

#include "controller/router/router.h"
#include "tests/controller/kube/controller_replica.h"
#include "tests/controller/kube/fake_deployment_controller.h"
#include "tests/controller/kube/installed_api_server.h"

namespace nibble::kube {
namespace {

using namespace testing;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// An engine stand-in on loopback: every pod's IP is 127.0.0.1 and the backend reads its port.
// Like an engine started with --api-key-file, it answers only requests carrying its key.
class EngineStandIn {
 public:
  EngineStandIn() {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req,
                                                httplib::Response& res) {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (key_.empty() || req.get_header_value("Authorization") != "Bearer " + key_) {
        ++refused;
        res.status = 401;
        return;
      }
      ++requests;
      res.set_content(Json{{"object", "chat.completion"}, {"echo", Json::parse(req.body)}}.dump(),
                      "application/json");
    });
    port = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~EngineStandIn() {
    server_.stop();
    thread_.join();
  }
  void set_key(const std::string& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    key_ = key;
  }
  int port = 0;
  std::atomic<int> requests{0}, refused{0};

 private:
  std::mutex mutex_;
  std::string key_;
  httplib::Server server_;
  std::thread thread_;
};

Json zero_recipe(const std::string& name) {
  return {{"apiVersion", "nibble.dev/v1alpha1"},
          {"kind", "ModelRecipe"},
          {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"spec",
           {{"model", {{"source", "file:///models/" + name}, {"servedName", name + "-model"}}},
            {"replicas", {{"min", 0}, {"max", 2}}}}}};
}

// The controller replica, the router in front of its route table, the engine stand-in and the
// Deployment controller, wired as the daemon wires them (controller/daemon/main.cpp).
struct Cluster {
  explicit Cluster(std::chrono::seconds hold_timeout) {
    start_as_installed(server);
    PodReading pods;
    pods.engine_port = engine.port;
    replica = std::make_unique<ControllerReplica>(server.url(), "ctl", false, render, pods);
    router::RouterConfig rc;
    rc.port = 0;
    rc.hold_timeout = hold_timeout;
    router = std::make_unique<router::Router>(replica->routes, router_registry, rc);
    EXPECT_TRUE(router->start());
    replica->router_load = [this](const std::string& recipe) {
      return controller::RouterLoad{router->inflight(recipe), router->held(recipe),
                                    router->last_request(recipe)};
    };
    router->set_demand_callback([this](const std::string&) { replica->loop.wake(); });
  }
  ~Cluster() {
    router->stop();
    replica.reset();
  }
  // The engines read their key from the Secret the controller created for the recipe.
  void start(const std::string& recipe) {
    replica->start();
    EXPECT_TRUE(eventually([&] {
      const auto secret = server.object("/api/v1/secrets", "ns", recipe + "-engine-key");
      if (secret) engine.set_key((*secret)["stringData"]["api-key"]);
      return secret.has_value();
    }));
  }
  // Scaled to zero and routed: requests for it will be held.
  bool at_zero(const std::string& name) {
    return eventually([&] {
      const auto d = get(server, kDeploymentsPath, name);
      const auto r = get(server, kRecipesPath, name);
      const auto route = replica->routes.find_by_recipe(name);
      return d && (*d)["spec"]["replicas"] == 0 && r &&
             (*r)["spec"]["replicas"].value("desired", -1) == 0 && route &&
             route->scale_from_zero && route->ready.empty();
    });
  }
  httplib::Result chat(const std::string& model) {
    httplib::Client client("127.0.0.1", router->port());
    client.set_read_timeout(std::chrono::seconds(30));
    return client.Post(
        "/v1/chat/completions",
        Json{{"model", model}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}}
            .dump(),
        "application/json");
  }

  FakeApiServer server;
  EngineStandIn engine;
  FakeDeploymentController kubelet{server, {.ready_after = milliseconds(300)}};
  metrics::Registry router_registry;
  std::unique_ptr<ControllerReplica> replica;
  std::unique_ptr<router::Router> router;
};

TEST(KubeScaleFromZero, HeldRequestGoesThroughOnceTheScaleSubresourceBroughtAReadyPod) {
  Cluster c(std::chrono::seconds(15));
  c.server.put_object(kRecipesPath, zero_recipe("z"));
  c.start("z");
  ASSERT_TRUE(c.at_zero("z")) << get(c.server, kRecipesPath, "z")->dump();
  EXPECT_EQ(c.kubelet.pods_created(), 0);
  const int scale_writes = c.server.count_requests("PUT", "/modelrecipes/z/scale");

  const auto sent = Clock::now();
  const httplib::Result answer = c.chat("z-model");
  const auto waited = Clock::now() - sent;
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(Json::parse(answer->body)["echo"]["model"], "z-model");
  EXPECT_EQ(c.engine.requests.load(), 1);
  EXPECT_EQ(c.engine.refused.load(), 0);  // the router sent the engine's key
  // It waited for the pod to turn ready, not for a resync.
  EXPECT_GE(waited, milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // The way up went through the scale subresource: one write of 1 (a second PUT only after a
  // 409, when a status write had moved the resourceVersion), which the Deployment followed.
  EXPECT_GE(c.server.count_requests("PUT", "/modelrecipes/z/scale"), scale_writes + 1);
  EXPECT_LE(c.server.count_requests("PUT", "/modelrecipes/z/scale"), scale_writes + 2);
  EXPECT_EQ((*get(c.server, kRecipesPath, "z"))["spec"]["replicas"]["desired"], 1);
  EXPECT_EQ((*get(c.server, kDeploymentsPath, "z"))["spec"]["replicas"], 1);
  EXPECT_EQ(c.kubelet.pods_created(), 1);
  EXPECT_TRUE(eventually([&] {
    return (*get(c.server, kRecipesPath, "z"))["status"].value("readyReplicas", 0) == 1;
  }));
}

TEST(KubeScaleFromZero, HeldRequestIsAnswered503WithRetryAfterWhenNoPodTurnsReadyInTime) {
  Cluster c(std::chrono::seconds(1));
  c.kubelet.hold_readiness("slow", true);  // an engine that never finishes loading
  c.server.put_object(kRecipesPath, zero_recipe("slow"));
  c.start("slow");
  ASSERT_TRUE(c.at_zero("slow"));

  const auto sent = Clock::now();
  const httplib::Result answer = c.chat("slow-model");
  const auto waited = Clock::now() - sent;
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 503) << answer->body;
  EXPECT_FALSE(answer->get_header_value("Retry-After").empty());
  const Json error = Json::parse(answer->body)["error"];
  EXPECT_NE(error.value("message", "").find("after waiting 1 s"), std::string::npos) << error;
  EXPECT_GE(waited, milliseconds(1000));
  EXPECT_LT(waited, milliseconds(3000));
  EXPECT_EQ(c.engine.requests.load(), 0);
  // The demand was real: the recipe was scaled up and its pod made, it just never got ready.
  EXPECT_EQ((*get(c.server, kRecipesPath, "slow"))["spec"]["replicas"]["desired"], 1);
  EXPECT_EQ(c.kubelet.pods_created(), 1);
}

}  // namespace
}  // namespace nibble::kube
