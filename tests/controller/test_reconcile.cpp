// The reconcile core's rules, one scenario each, then a simulated rollout driven to convergence.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/reconcile/reconcile.h"

namespace nibble::reconcile {
namespace {

using namespace std::chrono_literals;
const Clock::time_point t0 = Clock::time_point{} + 1000h;

ObservedReplica replica(std::string id, std::string hash, ReplicaPhase phase,
                        Clock::time_point since = t0, int failures = 0) {
  return {std::move(id), std::move(hash), phase, since, failures};
}

int count(const Plan& p, ActionKind kind) {
  return int(std::count_if(p.actions.begin(), p.actions.end(),
                           [&](const Action& a) { return a.kind == kind; }));
}

bool drains(const Plan& p, const std::string& id) {
  return std::any_of(p.actions.begin(), p.actions.end(), [&](const Action& a) {
    return a.kind == ActionKind::kDrain && a.replica_id == id;
  });
}

TEST(Reconcile, StartsMissingReplicasAndIsIdempotentWhenConverged) {
  EXPECT_EQ(count(plan_replicas({"r", "h1", 3}, {}, t0), ActionKind::kStart), 3);
  const std::vector<ObservedReplica> running = {replica("a", "h1", ReplicaPhase::kReady),
                                                replica("b", "h1", ReplicaPhase::kStarting),
                                                replica("c", "h1", ReplicaPhase::kReady)};
  EXPECT_TRUE(plan_replicas({"r", "h1", 3}, running, t0).actions.empty());
}

TEST(Reconcile, ScaleDownDrainsNotReadyThenNewest) {
  const std::vector<ObservedReplica> running = {
      replica("old", "h1", ReplicaPhase::kReady, t0 - 100s),
      replica("new", "h1", ReplicaPhase::kReady, t0 - 10s),
      replica("booting", "h1", ReplicaPhase::kStarting, t0 - 50s)};
  Plan one = plan_replicas({"r", "h1", 2}, running, t0);
  ASSERT_EQ(one.actions.size(), 1u);
  EXPECT_TRUE(drains(one, "booting"));
  Plan two = plan_replicas({"r", "h1", 1}, running, t0);
  EXPECT_TRUE(drains(two, "booting"));
  EXPECT_TRUE(drains(two, "new"));
  EXPECT_FALSE(drains(two, "old"));
}

TEST(Reconcile, CrashedReplicaWaitsForExponentialBackoff) {
  EXPECT_EQ(restart_delay(1, {}), 1s);
  EXPECT_EQ(restart_delay(4, {}), 8s);
  EXPECT_EQ(restart_delay(30, {}), 300s);
  const std::vector<ObservedReplica> crashed = {replica("a", "h1", ReplicaPhase::kExited, t0, 3)};
  Plan waiting = plan_replicas({"r", "h1", 1}, crashed, t0 + 2s);  // back-off is 4 s
  EXPECT_TRUE(waiting.crash_loop);
  EXPECT_TRUE(waiting.actions.empty()) << "no replacement while in back-off";
  EXPECT_EQ(waiting.next_wake, t0 + 4s);
  Plan retry = plan_replicas({"r", "h1", 1}, crashed, t0 + 4s);
  EXPECT_EQ(count(retry, ActionKind::kRemoveExited), 1);
  EXPECT_EQ(count(retry, ActionKind::kStart), 1);
  EXPECT_FALSE(retry.crash_loop);
}

TEST(Reconcile, DeletedRecipeDrainsEverything) {
  const std::vector<ObservedReplica> running = {replica("a", "h1", ReplicaPhase::kReady),
                                                replica("b", "h0", ReplicaPhase::kStarting),
                                                replica("c", "h1", ReplicaPhase::kExited, t0, 5)};
  Plan p = plan_replicas({"r", "h1", 2, true}, running, t0);
  EXPECT_TRUE(drains(p, "a"));
  EXPECT_TRUE(drains(p, "b"));
  EXPECT_EQ(count(p, ActionKind::kRemoveExited), 1);
  EXPECT_EQ(count(p, ActionKind::kStart), 0);
}

// Drives plan_replicas like the controller would: starts become Starting, then Ready one pass
// later; drains disappear. Ready capacity must never fall below its level before the rollout.
TEST(Reconcile, RollingUpdateKeepsCapacityAndConverges) {
  std::vector<ObservedReplica> world = {replica("a", "h1", ReplicaPhase::kReady),
                                        replica("b", "h1", ReplicaPhase::kReady)};
  int next_id = 0;
  for (int pass = 0; pass < 20; ++pass) {
    const Plan p = plan_replicas({"r", "h2", 2}, world, t0 + std::chrono::seconds(pass));
    for (auto& r : world) {
      if (r.phase == ReplicaPhase::kStarting) r.phase = ReplicaPhase::kReady;
    }
    for (const Action& a : p.actions) {
      if (a.kind == ActionKind::kStart)
        world.push_back(replica("n" + std::to_string(next_id++), "h2", ReplicaPhase::kStarting));
      if (a.kind == ActionKind::kDrain) {
        world.erase(std::remove_if(world.begin(), world.end(),
                                   [&](const auto& r) { return r.id == a.replica_id; }),
                    world.end());
      }
    }
    const int ready = int(std::count_if(
        world.begin(), world.end(), [](const auto& r) { return r.phase == ReplicaPhase::kReady; }));
    EXPECT_GE(ready, 2) << "pass " << pass;
    EXPECT_LE(int(world.size()), 3) << "surge is one replica";
  }
  ASSERT_EQ(world.size(), 2u);
  for (const auto& r : world) {
    EXPECT_EQ(r.spec_hash, "h2");
    EXPECT_EQ(r.phase, ReplicaPhase::kReady);
  }
  EXPECT_TRUE(plan_replicas({"r", "h2", 2}, world, t0 + 60s).actions.empty());
}

}  // namespace
}  // namespace nibble::reconcile
