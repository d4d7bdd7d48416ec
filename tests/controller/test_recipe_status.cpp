// Status as stored and as the CRD's status subresource gets it: transition times kept while a
// condition's status stays, the same conditions in both shapes.
#include <gtest/gtest.h>

#include "controller/loop/recipe_status.h"

namespace nibble::controller {
namespace {

reconcile::RecipeFacts ready_facts(int ready) {
  reconcile::RecipeFacts f;
  f.generation = 2;
  f.desired = 1;
  f.replicas = 1;
  f.ready = f.current_ready = ready;
  return f;
}

TEST(RecipeStatus, TransitionTimeMovesOnlyWhenTheStatusChanges) {
  RecipeStatus first;
  first.observed_generation = 2;
  apply_derived(first, reconcile::derive_status(ready_facts(0)), {}, "2026-01-01T00:00:00Z");
  ASSERT_EQ(first.conditions.size(), 3u);
  for (const Condition& c : first.conditions)
    EXPECT_EQ(c.last_transition_time, "2026-01-01T00:00:00Z");

  RecipeStatus second;
  second.observed_generation = 2;
  apply_derived(second, reconcile::derive_status(ready_facts(1)), first, "2026-01-01T00:05:00Z");
  EXPECT_EQ(second.phase, reconcile::RecipePhase::kReady);
  // Ready went False → True and Progressing True → False; Degraded stayed False.
  EXPECT_EQ(second.conditions[0].last_transition_time, "2026-01-01T00:05:00Z");
  EXPECT_TRUE(second.conditions[0].status);
  EXPECT_EQ(second.conditions[1].last_transition_time, "2026-01-01T00:05:00Z");
  EXPECT_EQ(second.conditions[2].last_transition_time, "2026-01-01T00:00:00Z");
  for (const Condition& c : second.conditions) EXPECT_EQ(c.observed_generation, 2);
}

TEST(RecipeStatus, LocalJsonAndCrdStatusCarryTheSameConditions) {
  RecipeStatus st;
  st.name = "demo";
  st.served_name = "demo-chat";
  st.generation = 3;
  st.observed_generation = 2;
  st.desired_replicas = 1;
  st.endpoint = "http://localhost:8000/v1";
  st.engines.push_back({"demo-bc2d4", reconcile::ReplicaPhase::kReady, 4242, "127.0.0.1", 40001,
                        true, 0, "/s/logs/demo-bc2d4.log"});
  reconcile::RecipeFacts f = ready_facts(1);
  f.invalid_spec = "spec.replicas: min must not exceed max";
  apply_derived(st, reconcile::derive_status(f), {}, "2026-01-01T00:00:00Z");

  const nlohmann::json local = to_json(st);
  const nlohmann::json crd = to_crd_status(st);
  EXPECT_EQ(local["conditions"], crd["conditions"]);
  EXPECT_EQ(crd["phase"], "Degraded");
  EXPECT_EQ(crd["observedGeneration"], 2);
  EXPECT_EQ(crd["lastError"], "spec.replicas: min must not exceed max");
  const nlohmann::json degraded = crd["conditions"][2];
  EXPECT_EQ(degraded["type"], "Degraded");
  EXPECT_EQ(degraded["status"], "True");
  EXPECT_EQ(degraded["reason"], "InvalidSpec");
  EXPECT_EQ(degraded["observedGeneration"], 2);
  EXPECT_EQ(degraded["lastTransitionTime"], "2026-01-01T00:00:00Z");
  // Local-only facts stay out of the CRD's status.
  EXPECT_FALSE(crd.contains("engines"));
  EXPECT_EQ(local["engines"][0]["phase"], "Ready");
  EXPECT_EQ(local["engines"][0]["pid"], 4242);
  EXPECT_EQ(local["generation"], 3);
  EXPECT_EQ(local["servedName"], "demo-chat");
}

}  // namespace
}  // namespace nibble::controller
