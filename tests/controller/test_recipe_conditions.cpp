// Typed status: phase and conditions derived from the facts of one pass, one rule per test.
#include <gtest/gtest.h>

#include "controller/reconcile/recipe_conditions.h"

namespace nibble::reconcile {
namespace {

using namespace std::chrono_literals;

// "True/Reason" for a condition type, as kubectl shows it.
std::string shown(const DerivedStatus& d, ConditionType type) {
  for (const ConditionState& c : d.conditions) {
    if (c.type == type) return std::string(c.status ? "True/" : "False/") + to_string(c.reason);
  }
  return "missing";
}

// Ready, Progressing and Degraded as kubectl shows them.
void expect_conditions(const DerivedStatus& d, const std::string& ready,
                       const std::string& progressing, const std::string& degraded) {
  EXPECT_EQ(shown(d, ConditionType::kReady), ready);
  EXPECT_EQ(shown(d, ConditionType::kProgressing), progressing);
  EXPECT_EQ(shown(d, ConditionType::kDegraded), degraded);
}

const ConditionState& condition(const DerivedStatus& d, ConditionType type) {
  for (const ConditionState& c : d.conditions)
    if (c.type == type) return c;
  throw std::logic_error("missing condition");
}

// Two replicas wanted, both ready with the current revision.
RecipeFacts converged() {
  RecipeFacts f;
  f.generation = 3;
  f.desired = 2;
  f.replicas = 2;
  f.ready = 2;
  f.current_ready = 2;
  return f;
}

TEST(RecipeConditions, ConvergedIsReadyAndNotProgressing) {
  const DerivedStatus d = derive_status(converged());
  EXPECT_EQ(d.phase, RecipePhase::kReady);
  EXPECT_EQ(shown(d, ConditionType::kReady), "True/ReplicasAvailable");
  EXPECT_EQ(condition(d, ConditionType::kReady).message, "2/2 replicas ready");
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "False/ReplicasReady");
  EXPECT_EQ(condition(d, ConditionType::kProgressing).message,
            "2 of 2 replicas ready with generation 3");
  EXPECT_EQ(shown(d, ConditionType::kDegraded), "False/AsExpected");
  EXPECT_EQ(d.conditions[0].type, ConditionType::kReady);
  EXPECT_EQ(d.conditions[1].type, ConditionType::kProgressing);
  EXPECT_EQ(d.conditions[2].type, ConditionType::kDegraded);
}

TEST(RecipeConditions, ProgressingReasonsRollThenScale) {
  RecipeFacts f = converged();
  f.outdated = 1;  // an old revision still runs: rolling, even with enough ready
  f.replicas = 3;
  DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kProgressing);
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/RollingUpdate");
  EXPECT_EQ(shown(d, ConditionType::kReady), "True/ReplicasAvailable");

  f = converged();
  f.desired = 3;
  d = derive_status(f);
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/ScalingUp");
  EXPECT_EQ(condition(d, ConditionType::kReady).message, "2/3 replicas ready");

  f = converged();
  f.desired = 1;
  d = derive_status(f);
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/ScalingDown");

  f = converged();
  f.ready = f.current_ready = 0;
  d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kProgressing);
  EXPECT_EQ(shown(d, ConditionType::kReady), "False/NoReadyReplica");
}

TEST(RecipeConditions, ScaledToZeroIsReadyBecauseARequestStartsOne) {
  RecipeFacts f;
  f.generation = 1;
  const DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kScaledToZero);
  expect_conditions(d, "True/ScaledToZero", "False/ScaledToZero", "False/AsExpected");
  f.replicas = 1;  // draining down to zero is still scaling down
  EXPECT_EQ(derive_status(f).phase, RecipePhase::kProgressing);
}

TEST(RecipeConditions, CrashLoopIsDegradedWithTheExitAndTheWait) {
  RecipeFacts f = converged();
  f.ready = f.current_ready = 1;
  f.crash_loop = true;
  f.retry_in = 4s;
  f.last_exit = "replica demo-x7k2p exited with code 2 (log: /s/logs/demo-x7k2p.log)";
  DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kDegraded);
  EXPECT_EQ(shown(d, ConditionType::kDegraded), "True/CrashLoopBackOff");
  EXPECT_EQ(condition(d, ConditionType::kDegraded).message, f.last_exit + "; restarting in 4 s");
  EXPECT_EQ(shown(d, ConditionType::kReady), "True/ReplicasAvailable");  // one still serves
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/CrashLoopBackOff");
  EXPECT_EQ(d.last_error, f.last_exit);
  f.ready = f.current_ready = 0;
  EXPECT_EQ(shown(derive_status(f), ConditionType::kReady), "False/CrashLoopBackOff");
}

TEST(RecipeConditions, ModelStatesComeBeforeReplicaStates) {
  RecipeFacts f;
  f.desired = 1;
  f.crash_loop = true;  // not reported while the weights are the problem
  f.model = ModelAvailability::kDownloading;
  f.model_message = "12.5 of 17.0 GB";
  DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kDownloading);
  EXPECT_EQ(shown(d, ConditionType::kReady), "False/Downloading");
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/Downloading");
  EXPECT_EQ(condition(d, ConditionType::kProgressing).message, "12.5 of 17.0 GB");
  EXPECT_EQ(shown(d, ConditionType::kDegraded), "False/AsExpected");

  f.model = ModelAvailability::kFailed;
  f.model_message = "/nonexistent/model has no config.json";
  d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kDegraded);
  EXPECT_EQ(shown(d, ConditionType::kDegraded), "True/ModelUnavailable");
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "False/ModelUnavailable");
  EXPECT_EQ(d.last_error, f.model_message);
}

TEST(RecipeConditions, InvalidSpecWithoutARunningSpecIsInvalid) {
  RecipeFacts f;
  f.has_valid_spec = false;
  f.invalid_spec = "spec.replicas.mx: unknown field";
  const DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kInvalid);
  expect_conditions(d, "False/InvalidSpec", "False/InvalidSpec", "True/InvalidSpec");
  EXPECT_EQ(condition(d, ConditionType::kDegraded).message, f.invalid_spec);
  EXPECT_EQ(d.last_error, f.invalid_spec);
}

TEST(RecipeConditions, InvalidEditOfARunningRecipeKeepsReadyAndReportsDegraded) {
  RecipeFacts f = converged();
  f.invalid_spec = "spec.replicas: min must not exceed max";
  const DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kDegraded);
  expect_conditions(d, "True/ReplicasAvailable", "False/ReplicasReady", "True/InvalidSpec");
  EXPECT_EQ(d.last_error, f.invalid_spec);
}

TEST(RecipeConditions, ReconcileErrorAndTermination) {
  RecipeFacts f = converged();
  f.reconcile_error = "cannot fork: out of memory";
  DerivedStatus d = derive_status(f);
  EXPECT_EQ(d.phase, RecipePhase::kDegraded);
  EXPECT_EQ(shown(d, ConditionType::kDegraded), "True/ReconcileError");
  EXPECT_EQ(shown(d, ConditionType::kReady), "True/ReplicasAvailable");
  EXPECT_EQ(d.last_error, f.reconcile_error);

  RecipeFacts gone;
  gone.deleted = true;
  gone.replicas = 2;
  d = derive_status(gone);
  EXPECT_EQ(d.phase, RecipePhase::kTerminating);
  EXPECT_EQ(shown(d, ConditionType::kReady), "False/Terminating");
  EXPECT_EQ(condition(d, ConditionType::kReady).message, "2 replicas draining");
  EXPECT_EQ(shown(d, ConditionType::kProgressing), "True/Terminating");
}

TEST(RecipeConditions, NamesAreKubernetesCamelCase) {
  EXPECT_STREQ(to_string(RecipePhase::kScaledToZero), "ScaledToZero");
  EXPECT_STREQ(to_string(ConditionType::kProgressing), "Progressing");
  EXPECT_STREQ(to_string(ConditionReason::kCrashLoopBackOff), "CrashLoopBackOff");
  EXPECT_STREQ(to_string(ConditionReason::kAsExpected), "AsExpected");
}

}  // namespace
}  // namespace nibble::reconcile
