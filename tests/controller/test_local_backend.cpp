// The local backend driven by the reconcile core against real `nibble-engine serve` processes
// on a tiny model: start, kill -9 and restart, adoption by a new controller, rolling update,
// delete leaving no process behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "controller/local/local_backend.h"
#include "tests/server/serve_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::local {
namespace {

using namespace std::chrono_literals;

recipe::ModelRecipe tiny_recipe() {
  recipe::ModelRecipe r;
  r.name = "tiny";
  r.served_name = "tiny";
  r.engine.max_model_len = 512;
  r.engine.max_num_seqs = 8;
  return r;
}

int count_ready(const std::vector<reconcile::ObservedReplica>& observed, const std::string& hash) {
  int n = 0;
  for (const auto& r : observed)
    n += r.phase == reconcile::ReplicaPhase::kReady && r.spec_hash == hash;
  return n;
}

// One controller pass: observe, plan, apply. Returns what was observed before acting.
std::vector<reconcile::ObservedReplica> pass(LocalBackend& backend,
                                             const recipe::ModelRecipe& recipe,
                                             const reconcile::DesiredRecipe& desired,
                                             const std::string& model_dir) {
  const auto now = reconcile::Clock::now();
  auto observed = backend.observe(recipe.name, now);
  for (const auto& action : reconcile::plan_replicas(desired, observed, now).actions) {
    backend.apply(recipe, desired.spec_hash, model_dir, action, now);
  }
  return observed;
}

// Runs passes until `done` holds for what is observed, or the time runs out.
template <typename Done>
bool converge(LocalBackend& backend, const recipe::ModelRecipe& recipe,
              const reconcile::DesiredRecipe& desired, const std::string& model_dir, Done done,
              std::chrono::seconds limit = 90s) {
  const auto deadline = reconcile::Clock::now() + limit;
  while (reconcile::Clock::now() < deadline) {
    if (done(pass(backend, recipe, desired, model_dir))) return true;
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

TEST(LocalBackend, ReplicasStartRestartGetAdoptedRollAndStop) {
  std::string why;
  const std::string model = server::testing::tiny_model_dir(why);
  if (model.empty()) {
    if (nibble::testing::tools_required()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  nibble::testing::TempDir state;
  LocalBackendConfig config;
  config.engine_binary = NIBBLE_ENGINE;
  config.state_dir = state.path();
  config.drain_timeout = 10s;
  config.extra_engine_args = {"--threads", "1", "--kv-cache-memory-bytes", "4194304"};
  const recipe::ModelRecipe recipe = tiny_recipe();
  reconcile::DesiredRecipe desired{"tiny", "h1", 2};

  auto backend = std::make_unique<LocalBackend>(config);
  ASSERT_TRUE(converge(*backend, recipe, desired, model,
                       [](const auto& o) { return count_ready(o, "h1") == 2; }));
  auto endpoints = backend->ready_endpoints("tiny");
  ASSERT_EQ(endpoints.size(), 2u);
  httplib::Client client("127.0.0.1", endpoints[0].port);
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_NE(models->body.find("\"tiny\""), std::string::npos);

  // kill -9 one engine: it is seen as exited, restarted after the back-off, and Ready again.
  std::ifstream record(state.path() / "replicas" / (endpoints[0].replica_id + ".json"));
  const int victim_pid = nlohmann::json::parse(record)["pid"];
  ASSERT_EQ(kill(victim_pid, SIGKILL), 0);
  bool saw_exit = false;
  ASSERT_TRUE(converge(*backend, recipe, desired, model, [&](const auto& o) {
    for (const auto& r : o) saw_exit |= r.phase == reconcile::ReplicaPhase::kExited;
    return saw_exit && count_ready(o, "h1") == 2;
  }));
  EXPECT_FALSE(backend->last_exit("tiny").empty());

  // A new controller on the same state directory adopts both engines: nothing to start.
  backend.reset();  // the old controller goes away; its engines keep running
  backend = std::make_unique<LocalBackend>(config);
  backend->adopt_running();
  const auto adopted = backend->observe("tiny", reconcile::Clock::now());
  ASSERT_EQ(adopted.size(), 2u);
  EXPECT_EQ(count_ready(adopted, "h1"), 2);
  EXPECT_TRUE(reconcile::plan_replicas(desired, adopted, reconcile::Clock::now()).actions.empty());

  // Spec change: replicas of the new spec replace the old ones.
  desired.spec_hash = "h2";
  ASSERT_TRUE(converge(*backend, recipe, desired, model,
                       [](const auto& o) { return count_ready(o, "h2") == 2 && o.size() == 2; }));

  // Delete: everything drains and exits.
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator(state.path() / "replicas")) {
    std::ifstream in(entry.path());
    pids.push_back(nlohmann::json::parse(in)["pid"]);
  }
  desired.deleted = true;
  ASSERT_TRUE(converge(*backend, recipe, desired, model, [](const auto& o) { return o.empty(); }));
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "engine " << pid << " still runs";
  EXPECT_TRUE(std::filesystem::is_empty(state.path() / "replicas"));
}

}  // namespace
}  // namespace nibble::local
