// The controller loop against a fake ReplicaBackend: the loop knows only the interface, tells
// it each recipe's desired state, routes the replicas it reports, derives status from what it
// observes and drains recipes that are gone.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "controller/loop/controller_loop.h"
#include "controller/loop/engine_model_card.h"
#include "controller/store/recipe_file_store.h"
#include "metrics/registry.h"
#include "tests/support/temp_dir.h"

namespace nibble::controller {
namespace {

using namespace std::chrono_literals;
using reconcile::ReplicaPhase;

class FakeBackend final : public reconcile::ReplicaBackend {
 public:
  std::vector<reconcile::DesiredState> synced;
  std::vector<std::string> drained;
  reconcile::RecipeObservation next;  // what sync and drain report

  reconcile::RecipeObservation sync(const reconcile::DesiredState& desired,
                                    reconcile::Clock::time_point) override {
    synced.push_back(desired);
    current_[desired.recipe.name] = next.replicas;
    return next;
  }
  reconcile::RecipeObservation drain(const std::string& recipe,
                                     reconcile::Clock::time_point) override {
    drained.push_back(recipe);
    current_[recipe] = next.replicas;
    return next;
  }
  std::vector<reconcile::ReplicaView> replicas(const std::string& recipe) const override {
    auto it = current_.find(recipe);
    return it == current_.end() ? std::vector<reconcile::ReplicaView>{} : it->second;
  }
  std::vector<std::string> recipes() const override {
    std::vector<std::string> out;
    for (const auto& [name, replicas] : current_)
      if (!replicas.empty()) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, std::vector<reconcile::ReplicaView>> current_;
};

reconcile::ReplicaView replica(std::string id, std::string revision, ReplicaPhase phase) {
  reconcile::ReplicaView v;
  v.id = std::move(id);
  v.revision = std::move(revision);
  v.phase = phase;
  v.endpoint = {"10.0.0.5", 8000};
  return v;
}

std::string condition(const RecipeStatus& st, reconcile::ConditionType type) {
  for (const Condition& c : st.conditions)
    if (c.type == type)
      return std::string(c.status ? "True/" : "False/") + reconcile::to_string(c.reason);
  return "missing";
}

struct Fixture {
  nibble::testing::TempDir state, model;
  store::RecipeFileStore store{state.path()};
  FakeBackend backend;
  ModelResolver models{state.path() / "cache", {}};
  router::RouteTable routes;
  metrics::Registry registry;
  std::vector<RecipeStatus> changed;
  ControllerLoop loop;

  explicit Fixture(bool resolve_models = true)
      : loop(
            [&] {
              ControllerLoopConfig c{state.path(), 1s, "http://router:8000/v1"};
              c.resolve_models = resolve_models;
              c.status_changed = [this](const RecipeStatus& st) { changed.push_back(st); };
              return c;
            }(),
            store, backend, models, routes, registry, nullptr) {
    std::ofstream(model.path() / "config.json") << "{}";
  }
  store::ApplyResult apply(const std::string& source, int replicas) {
    const std::string n = std::to_string(replicas);
    return store.apply(
        "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: demo}\nspec:\n"
        "  model: {source: " +
        source + "}\n  replicas: {min: " + n + ", max: " + n + "}\n");
  }
};

TEST(ControllerLoop, TellsTheBackendTheDesiredStateAndRoutesItsReadyReplicas) {
  Fixture f;
  const store::ApplyResult applied = f.apply(f.model.path().string(), 2);
  ASSERT_TRUE(applied.parsed.ok()) << applied.parsed.error_text();
  const std::string revision = store::spec_hash(applied.parsed.recipe);
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kReady),
                             replica("demo-b", revision, ReplicaPhase::kStarting)};
  f.loop.reconcile_once();

  ASSERT_EQ(f.backend.synced.size(), 1u);
  const reconcile::DesiredState& d = f.backend.synced[0];
  EXPECT_EQ(d.recipe.name, "demo");
  EXPECT_EQ(d.revision, revision);
  EXPECT_EQ(d.generation, 1);
  EXPECT_EQ(d.replicas, 2);
  EXPECT_FALSE(d.hold_starts);
  EXPECT_EQ(d.model_dir, f.model.path());

  const auto route = f.routes.find_by_recipe("demo");
  ASSERT_TRUE(route);
  ASSERT_EQ(route->ready.size(), 1u);  // only the ready replica, at the host it reported
  EXPECT_EQ(route->ready[0].id, "demo-a");
  EXPECT_EQ(route->ready[0].host, "10.0.0.5");
  EXPECT_EQ(route->ready[0].port, 8000);
  EXPECT_TRUE(route->starting);

  const RecipeStatus st = f.loop.status("demo").value();
  EXPECT_EQ(st.phase, reconcile::RecipePhase::kProgressing);
  EXPECT_EQ(condition(st, reconcile::ConditionType::kProgressing), "True/ScalingUp");
  EXPECT_EQ(condition(st, reconcile::ConditionType::kReady), "True/ReplicasAvailable");
  EXPECT_EQ(st.ready_replicas, 1);
  EXPECT_EQ(st.replicas, 2);
  ASSERT_EQ(st.engines.size(), 2u);
  EXPECT_EQ(st.engines[0].host, "10.0.0.5");
  EXPECT_TRUE(st.engines[0].up_to_date);
  ASSERT_EQ(f.changed.size(), 1u);  // told once; the same status again is not news
  f.loop.reconcile_once();
  EXPECT_EQ(f.changed.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(f.state.path() / "status" / "demo.json"));

  f.backend.next.replicas[1].phase = ReplicaPhase::kReady;
  f.loop.reconcile_once();
  EXPECT_EQ(f.loop.status("demo")->phase, reconcile::RecipePhase::kReady);
  EXPECT_EQ(f.changed.size(), 2u);
  EXPECT_EQ(f.routes.find_by_recipe("demo")->ready.size(), 2u);
}

TEST(ControllerLoop, ACrashLoopTheBackendReportsBecomesDegraded) {
  Fixture f;
  const auto applied = f.apply(f.model.path().string(), 1);
  const std::string revision = store::spec_hash(applied.parsed.recipe);
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kExited)};
  f.backend.next.crash_loop = true;
  f.backend.next.retry_at = reconcile::Clock::now() + 8s;
  f.backend.next.exits = {{"demo-a", "replica demo-a exited with code 2 (log: x)", {}}};
  f.loop.reconcile_once();
  const RecipeStatus st = f.loop.status("demo").value();
  EXPECT_EQ(st.phase, reconcile::RecipePhase::kDegraded);
  EXPECT_EQ(condition(st, reconcile::ConditionType::kDegraded), "True/CrashLoopBackOff");
  EXPECT_EQ(condition(st, reconcile::ConditionType::kReady), "False/CrashLoopBackOff");
  EXPECT_EQ(st.last_error, "replica demo-a exited with code 2 (log: x)");
  EXPECT_NE(st.conditions[2].message.find("; restarting in "), std::string::npos);
}

TEST(ControllerLoop, MissingWeightsHoldStartsUnlessTheBackendPlacesThem) {
  Fixture local;
  local.apply("/nonexistent/model", 1);
  local.loop.reconcile_once();
  ASSERT_EQ(local.backend.synced.size(), 1u);
  EXPECT_TRUE(local.backend.synced[0].hold_starts);
  EXPECT_EQ(condition(local.loop.status("demo").value(), reconcile::ConditionType::kDegraded),
            "True/ModelUnavailable");

  Fixture kube(/*resolve_models=*/false);
  kube.apply("/nonexistent/model", 1);
  kube.loop.reconcile_once();
  ASSERT_EQ(kube.backend.synced.size(), 1u);
  EXPECT_FALSE(kube.backend.synced[0].hold_starts);
  EXPECT_EQ(condition(kube.loop.status("demo").value(), reconcile::ConditionType::kDegraded),
            "False/AsExpected");
}

// A draft model (speculativeConfig's draft_model) is resolved as the model is: the backend
// gets its directory, and a missing draft holds starts with a status that names it.
TEST(ControllerLoop, ADraftModelIsResolvedAsTheModelIs) {
  Fixture f;
  nibble::testing::TempDir draft;
  std::ofstream(draft.path() / "config.json") << "{}";
  const auto apply_with_draft = [&](const std::string& draft_dir) {
    return f.store.apply(
        "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: demo}\nspec:\n"
        "  model: {source: " +
        f.model.path().string() +
        "}\n  engine:\n    speculativeConfig: '{\"method\": \"draft_model\", \"model\": \"" +
        draft_dir + "\", \"num_speculative_tokens\": 2}'\n");
  };
  ASSERT_TRUE(apply_with_draft(draft.path().string()).parsed.ok());
  f.loop.reconcile_once();
  ASSERT_EQ(f.backend.synced.size(), 1u);
  EXPECT_FALSE(f.backend.synced[0].hold_starts);
  EXPECT_EQ(f.backend.synced[0].model_dir, f.model.path());
  EXPECT_EQ(f.backend.synced[0].draft_model_dir, draft.path());

  ASSERT_TRUE(apply_with_draft("/nonexistent/draft").parsed.ok());
  f.loop.reconcile_once();
  ASSERT_EQ(f.backend.synced.size(), 2u);
  EXPECT_TRUE(f.backend.synced[1].hold_starts);
  const RecipeStatus st = f.loop.status("demo").value();
  EXPECT_EQ(condition(st, reconcile::ConditionType::kDegraded), "True/ModelUnavailable");
  bool named = false;
  for (const Condition& c : st.conditions)
    named |= c.message.find("draft model: model directory /nonexistent/draft has no config.json") !=
             std::string::npos;
  EXPECT_TRUE(named) << "no condition names the draft model";
}

// A hand-written recipe whose draft path could reach other files runs nothing and says why.
TEST(ControllerLoop, AnEscapingDraftPathIsAnInvalidSpec) {
  Fixture f;
  std::filesystem::create_directories(f.state.path() / "recipes");
  std::ofstream(f.state.path() / "recipes" / "demo.yaml")
      << "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: demo}\nspec:\n"
         "  model: {source: "
      << f.model.path().string()
      << "}\n  engine:\n    speculativeConfig: '{\"method\": \"draft_model\", \"model\": "
         "\"/models/../etc\", \"num_speculative_tokens\": 2}'\n";
  f.loop.reconcile_once();
  EXPECT_TRUE(f.backend.synced.empty());
  const RecipeStatus st = f.loop.status("demo").value();
  EXPECT_EQ(st.phase, reconcile::RecipePhase::kInvalid);
  EXPECT_EQ(condition(st, reconcile::ConditionType::kDegraded), "True/InvalidSpec");
  bool named = false;
  for (const Condition& c : st.conditions)
    named |= c.message.find(
                 "spec.engine.speculativeConfig: draft_model's model: '/models/../etc' "
                 "has a '..' part") != std::string::npos;
  EXPECT_TRUE(named) << "no condition names the field";
}

TEST(ControllerLoop, ARemovedRecipeIsDrainedThenForgotten) {
  Fixture f;
  const auto applied = f.apply(f.model.path().string(), 1);
  const std::string revision = store::spec_hash(applied.parsed.recipe);
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kReady)};
  f.loop.reconcile_once();
  ASSERT_TRUE(f.routes.find_by_recipe("demo"));

  ASSERT_TRUE(f.store.remove("demo"));
  f.backend.next.replicas[0].phase = ReplicaPhase::kDraining;
  f.loop.reconcile_once();
  EXPECT_EQ(f.backend.drained, std::vector<std::string>{"demo"});
  EXPECT_FALSE(f.routes.find_by_recipe("demo"));
  const RecipeStatus st = f.loop.status("demo").value();
  EXPECT_EQ(st.phase, reconcile::RecipePhase::kTerminating);
  EXPECT_EQ(condition(st, reconcile::ConditionType::kReady), "False/Terminating");

  f.backend.next.replicas.clear();
  f.loop.reconcile_once();
  EXPECT_FALSE(f.loop.status("demo"));
  EXPECT_FALSE(std::filesystem::exists(f.state.path() / "status" / "demo.json"));
}

TEST(ControllerLoop, TheRouteSaysWhyNoReplicaCanCome) {
  Fixture f;
  const auto applied = f.apply(f.model.path().string(), 1);
  const std::string revision = store::spec_hash(applied.parsed.recipe);
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kExited)};
  f.backend.next.crash_loop = true;
  f.backend.next.retry_at = reconcile::Clock::now() + 4500ms;
  reconcile::ReplicaExit exit{"demo-a", "replica demo-a exited with code 3 (log: x.log)", {}};
  exit.last_log_lines = "loading weights\n" + std::string(400, 'e') + "\n";
  f.backend.next.exits = {exit};
  f.loop.reconcile_once();
  auto route = f.routes.find_by_recipe("demo");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->unavailable,
            "its replicas are in CrashLoopBackOff (none ready; next restart in 4 s): replica "
            "demo-a exited with code 3 (log: x.log); its last log lines: loading weights | " +
                std::string(300, 'e'));
  EXPECT_FALSE(route->can_serve());

  // Restarted after one failure: given its chance, requests wait for it. After two failures in
  // a row it is still crash-looping between its restart and its next exit.
  f.backend.next.crash_loop = false;
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kStarting)};
  f.backend.next.replicas[0].restarts = 1;
  f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->unavailable, "");
  EXPECT_TRUE(f.routes.find_by_recipe("demo")->can_serve());
  f.backend.next.replicas[0].restarts = 3;
  f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->unavailable.rfind(
                "its replicas are in CrashLoopBackOff (none ready; restarted after 3 failures, "
                "not ready yet): replica demo-a exited with code 3",
                0),
            0u)
      << f.routes.find_by_recipe("demo")->unavailable;
  EXPECT_FALSE(f.routes.find_by_recipe("demo")->can_serve());
  // A replica starting afresh beside it may serve: requests wait.
  f.backend.next.replicas.push_back(replica("demo-c", revision, ReplicaPhase::kStarting));
  f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->unavailable, "");

  // A ready replica serves: its requests go there whatever the others do.
  f.backend.next.replicas.push_back(replica("demo-b", revision, ReplicaPhase::kReady));
  f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->unavailable, "");

  Fixture missing;
  missing.apply("/nonexistent/model", 1);
  missing.loop.reconcile_once();
  EXPECT_EQ(missing.routes.find_by_recipe("demo")->unavailable,
            "its weights cannot be fetched: model directory /nonexistent/model has no "
            "config.json (does it exist?)");
}

TEST(ControllerLoop, TheRouteCarriesTheEnginesModelCardAskedOncePerRevision) {
  httplib::Server engine;
  std::atomic<int> asked{0};
  engine.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    ++asked;
    if (req.get_header_value("Authorization") != "Bearer replica-key") {
      res.status = 401;
      return;
    }
    res.set_content(R"({"object":"list","data":[{"id":"demo","object":"model","root":"demo",)"
                    R"("max_model_len":1536,"owned_by":"nibble","created":1}]})",
                    "application/json");
  });
  const int port = engine.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { engine.listen_after_bind(); });
  while (!engine.is_running()) std::this_thread::sleep_for(1ms);

  Fixture f;
  const auto applied = f.apply(f.model.path().string(), 1);
  const std::string revision = store::spec_hash(applied.parsed.recipe);
  f.backend.next.replicas = {replica("demo-a", revision, ReplicaPhase::kStarting)};
  f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->card.root, "demo");  // the recipe's: no engine yet
  EXPECT_EQ(f.routes.find_by_recipe("demo")->card.max_model_len, 0);

  f.backend.next.replicas[0].phase = ReplicaPhase::kReady;
  f.backend.next.replicas[0].endpoint = {"127.0.0.1", port, "replica-key"};
  for (int i = 0; i < 3; ++i) f.loop.reconcile_once();
  EXPECT_EQ(f.routes.find_by_recipe("demo")->card.root, "demo");
  EXPECT_EQ(f.routes.find_by_recipe("demo")->card.max_model_len, 1536);
  EXPECT_EQ(asked, 1);
  engine.stop();
  serving.join();

  EXPECT_EQ(parse_model_card("not json", "x"), std::nullopt);
  EXPECT_EQ(parse_model_card(R"({"data":[]})", "x"), std::nullopt);
  EXPECT_EQ(parse_model_card(R"({"data":[{"id":"a","root":"/a"},{"id":"b","root":"/b",)"
                             R"("max_model_len":8}]})",
                             "b")
                ->root,
            "/b");
}

TEST(ControllerLoop, AnAppliedRecipeIsRoutedAsStartingUntilAPassRoutesIt) {
  Fixture f;
  recipe::ModelRecipe fresh;
  fresh.name = "fresh";
  fresh.served_name = "fresh-model";
  fresh.engine.max_model_len = 1024;
  f.loop.expect_recipe(fresh);
  auto route = f.routes.find_by_model("fresh-model");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->recipe, "fresh");
  EXPECT_TRUE(route->ready.empty());
  EXPECT_TRUE(route->starting);  // a request for it is held, as at a cold start
  EXPECT_TRUE(route->can_serve());
  EXPECT_EQ(route->card.max_model_len, 1024);

  // A recipe already routed keeps its route (and its ready replicas).
  router::RouteEntry serving{"demo", "demo", {{"demo-a", 9000}}, false};
  f.routes.publish(serving);
  recipe::ModelRecipe demo;
  demo.name = "demo";
  demo.served_name = "demo";
  f.loop.expect_recipe(demo);
  EXPECT_EQ(f.routes.find_by_recipe("demo")->ready.size(), 1u);

  // A pass that finds no such recipe stored (deleted meanwhile) takes the route away.
  f.loop.reconcile_once();
  EXPECT_FALSE(f.routes.find_by_recipe("fresh"));
  EXPECT_FALSE(f.routes.find_by_recipe("demo"));
}

}  // namespace
}  // namespace nibble::controller
