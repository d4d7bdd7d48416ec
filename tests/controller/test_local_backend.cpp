// The local backend, driven through the ReplicaBackend interface (sync, drain) against real
// `nibble-engine serve` processes on a tiny model: holding starts, start, kill -9 and restart
// with its exit recorded, adoption by a new controller, rolling update, delete leaving no
// process behind.
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

int count_ready(const std::vector<reconcile::ReplicaView>& replicas, const std::string& revision) {
  int n = 0;
  for (const auto& r : replicas)
    n += r.phase == reconcile::ReplicaPhase::kReady && r.revision == revision;
  return n;
}

// Runs passes (sync, or drain when `desired` is null) until `done` holds for what is
// observed, or the time runs out.
template <typename Done>
bool converge(LocalBackend& backend, const reconcile::DesiredState* desired, Done done,
              std::chrono::seconds limit = 90s) {
  const auto deadline = reconcile::Clock::now() + limit;
  while (reconcile::Clock::now() < deadline) {
    const auto now = reconcile::Clock::now();
    if (done(desired ? backend.sync(*desired, now) : backend.drain("tiny", now))) return true;
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

std::vector<std::string> ids(const std::vector<reconcile::ReplicaView>& replicas) {
  std::vector<std::string> out;
  for (const auto& r : replicas) out.push_back(r.id);
  return out;
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
  reconcile::DesiredState desired{tiny_recipe(), "h1", 1, 2, true, model};

  auto backend = std::make_unique<LocalBackend>(config);
  // Weights not available yet: nothing starts.
  EXPECT_TRUE(backend->sync(desired, reconcile::Clock::now()).replicas.empty());
  EXPECT_TRUE(backend->recipes().empty());

  desired.hold_starts = false;
  ASSERT_TRUE(converge(*backend, &desired, [](const reconcile::RecipeObservation& o) {
    return count_ready(o.replicas, "h1") == 2;
  }));
  EXPECT_EQ(backend->recipes(), std::vector<std::string>{"tiny"});
  const reconcile::ReplicaView first = backend->replicas("tiny")[0];
  EXPECT_EQ(first.endpoint.host, "127.0.0.1");
  EXPECT_GT(first.pid, 0);
  EXPECT_NE(first.log_file.find(first.id + ".log"), std::string::npos);
  httplib::Client client(first.endpoint.host, first.endpoint.port);
  // The engine answers its /v1 API only with the replica's own key (the router sends it).
  auto refused = client.Get("/v1/models");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  ASSERT_FALSE(first.endpoint.api_key.empty());
  auto models = client.Get("/v1/models", {{"Authorization", "Bearer " + first.endpoint.api_key}});
  ASSERT_TRUE(models);
  EXPECT_NE(models->body.find("\"tiny\""), std::string::npos);

  // kill -9 one engine: it is seen as exited, restarted after the back-off, and Ready again.
  std::ifstream record(state.path() / "replicas" / (first.id + ".json"));
  EXPECT_EQ(int(nlohmann::json::parse(record)["pid"]), first.pid);
  ASSERT_EQ(kill(first.pid, SIGKILL), 0);
  bool saw_exit = false;
  int restarted = 0;
  ASSERT_TRUE(converge(*backend, &desired, [&](const reconcile::RecipeObservation& o) {
    for (const auto& r : o.replicas) saw_exit |= r.phase == reconcile::ReplicaPhase::kExited;
    restarted += o.restarted;
    return saw_exit && count_ready(o.replicas, "h1") == 2;
  }));
  EXPECT_EQ(restarted, 1);
  const auto exits = backend->sync(desired, reconcile::Clock::now()).exits;
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].replica_id, first.id);
  EXPECT_NE(exits[0].description.find("killed by signal 9"), std::string::npos)
      << exits[0].description;

  // A new controller on the same state directory adopts both engines: nothing to start.
  const std::vector<std::string> before = ids(backend->replicas("tiny"));
  backend.reset();  // the old controller goes away; its engines keep running
  backend = std::make_unique<LocalBackend>(config);
  backend->adopt_running();
  const auto adopted = backend->sync(desired, reconcile::Clock::now());
  EXPECT_EQ(ids(adopted.replicas), before);
  EXPECT_EQ(count_ready(adopted.replicas, "h1"), 2);

  // Spec change: replicas of the new revision replace the old ones.
  desired.revision = "h2";
  ASSERT_TRUE(converge(*backend, &desired, [](const reconcile::RecipeObservation& o) {
    return count_ready(o.replicas, "h2") == 2 && o.replicas.size() == 2;
  }));

  // Delete: everything drains and exits.
  std::vector<int> pids;
  for (const auto& r : backend->replicas("tiny")) pids.push_back(r.pid);
  ASSERT_TRUE(converge(*backend, nullptr,
                       [](const reconcile::RecipeObservation& o) { return o.replicas.empty(); }));
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "engine " << pid << " still runs";
  EXPECT_TRUE(std::filesystem::is_empty(state.path() / "replicas"));
  EXPECT_TRUE(backend->recipes().empty());
}

}  // namespace
}  // namespace nibble::local
