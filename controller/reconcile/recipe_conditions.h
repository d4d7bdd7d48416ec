#pragma once
// Typed status of a recipe: the facts one reconcile pass measured (RecipeFacts) → its phase and
// the three conditions Ready, Progressing and Degraded, each with a reason from a closed set.
// Pure (no clock, no I/O), so local mode's status files and the ModelRecipe CRD's status
// subresource carry exactly the same conditions, and every rule is unit-tested.
//
// Rules, first match wins:
//   - no valid spec was ever accepted           → Invalid, Degraded/InvalidSpec;
//   - the recipe is deleted                     → Terminating, Ready False/Terminating;
//   - the pass failed (an exception)            → Degraded/ReconcileError;
//   - the weights are downloading               → Downloading, Progressing/Downloading;
//   - the weights are unavailable               → Degraded/ModelUnavailable;
//   - a replica waits in restart back-off       → Degraded/CrashLoopBackOff;
//   - zero desired and none running             → ScaledToZero (Ready: a request starts one);
//   - otherwise Progressing (RollingUpdate, ScalingUp, ScalingDown) or Ready (ReplicasReady).
// An invalid edit of a running recipe (the last valid spec keeps running) overrides Degraded
// with InvalidSpec and turns a healthy phase into Degraded.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace nibble::reconcile {

enum class RecipePhase {
  kInvalid,
  kDownloading,
  kProgressing,
  kReady,
  kDegraded,
  kScaledToZero,
  kTerminating,
};

enum class ConditionType { kReady, kProgressing, kDegraded };

enum class ConditionReason {
  kReplicasAvailable,  // Ready: some replica answers /health
  kNoReadyReplica,
  kScaledToZero,
  kDownloading,
  kModelUnavailable,
  kCrashLoopBackOff,
  kInvalidSpec,
  kReconcileError,
  kRollingUpdate,
  kScalingUp,
  kScalingDown,
  kReplicasReady,  // Progressing False: converged
  kTerminating,
  kAsExpected,  // Degraded False
};

enum class ModelAvailability { kReady, kDownloading, kFailed };

// Everything the conditions depend on, measured once per pass.
struct RecipeFacts {
  std::int64_t generation = 0;  // of the spec that runs
  bool has_valid_spec = true;   // false: no edit was ever valid, nothing runs
  std::string invalid_spec;     // errors of the current edit, "" when it is valid
  bool deleted = false;
  std::string reconcile_error;  // why this pass failed, "" when it did not
  ModelAvailability model = ModelAvailability::kReady;
  std::string model_message;  // download progress or why the weights are unavailable
  int desired = 0;            // the autoscaler's replica count
  int replicas = 0;           // not draining
  int ready = 0;              // ready, any revision
  int current_ready = 0;      // ready with the current revision
  int outdated = 0;           // not draining, another revision
  bool crash_loop = false;
  std::chrono::seconds retry_in{0};  // until the next restart, with crash_loop
  std::string last_exit;             // the last engine exit, "" if none
};

struct ConditionState {
  ConditionType type = ConditionType::kReady;
  bool status = false;
  ConditionReason reason = ConditionReason::kAsExpected;
  std::string message;
};

struct DerivedStatus {
  RecipePhase phase = RecipePhase::kProgressing;
  std::array<ConditionState, 3> conditions;  // Ready, Progressing, Degraded, in this order
  std::string last_error;                    // the message status shows as lastError
};

DerivedStatus derive_status(const RecipeFacts& facts);

// The CamelCase names Kubernetes status uses ("CrashLoopBackOff", "Ready", ...).
const char* to_string(RecipePhase phase);
const char* to_string(ConditionType type);
const char* to_string(ConditionReason reason);

}  // namespace nibble::reconcile
