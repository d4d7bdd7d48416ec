#pragma once
// What `nibble get recipes` / `describe` show and status files hold, shaped like a
// Kubernetes status: phase, replica counts, generations, endpoint and conditions
// (Ready, Progressing, Degraded) with reason, message, observedGeneration and transition time.
// Phase and conditions are typed (controller/reconcile/recipe_conditions.h) and derived from
// one set of facts; only to_json turns them into the strings Kubernetes shows.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "controller/reconcile/recipe_conditions.h"
#include "controller/reconcile/reconcile.h"

namespace nibble::controller {

struct Condition {
  reconcile::ConditionType type = reconcile::ConditionType::kReady;
  bool status = false;
  reconcile::ConditionReason reason = reconcile::ConditionReason::kAsExpected;
  std::string message;
  std::string last_transition_time;  // RFC 3339, kept while status stays the same
  std::int64_t observed_generation = 0;
};

struct EngineStatus {  // one replica's engine
  std::string id;
  reconcile::ReplicaPhase phase = reconcile::ReplicaPhase::kStarting;
  int pid = 0;  // 0 where the backend has no process ids (Kubernetes)
  std::string host;
  int port = 0;
  bool up_to_date = true;  // runs the current spec
  int restarts = 0;
  std::string log_file;
};

struct RecipeStatus {
  std::string name;
  std::string served_name;
  reconcile::RecipePhase phase = reconcile::RecipePhase::kProgressing;
  int desired_replicas = 0;
  int replicas = 0;
  int ready_replicas = 0;
  std::int64_t generation = 0;
  std::int64_t observed_generation = 0;
  std::string endpoint;
  std::vector<Condition> conditions;  // Ready, Progressing, Degraded
  std::string last_error;
  std::string autoscaler;  // the last decision and its inputs
  std::vector<EngineStatus> engines;
};

// Sets phase, conditions and lastError from derived status; a condition whose status did not
// change since `previous` keeps its lastTransitionTime, others get `now` (RFC 3339).
void apply_derived(RecipeStatus& status, const reconcile::DerivedStatus& derived,
                   const RecipeStatus& previous, const std::string& now);

nlohmann::json to_json(const RecipeStatus& status);
// The ModelRecipe CRD's `status` (what the status subresource holds): the same phase, counts
// and conditions as to_json, without the local-only fields (engines' pids and log files).
nlohmann::json to_crd_status(const RecipeStatus& status);
const char* to_string(reconcile::ReplicaPhase phase);
std::string rfc3339_now();

}  // namespace nibble::controller
