#include "controller/reconcile/recipe_conditions.h"

namespace nibble::reconcile {
namespace {

using Reason = ConditionReason;

struct Builder {
  DerivedStatus& out;
  const RecipeFacts& f;
  void ready(bool status, Reason reason, std::string message) {
    out.conditions[0] = {ConditionType::kReady, status, reason, std::move(message)};
  }
  // Ready follows the replicas: True with a replica answering, else False with `otherwise`.
  void ready_if_serving(Reason otherwise) {
    const bool serving = f.ready > 0;
    ready(serving, serving ? Reason::kReplicasAvailable : otherwise,
          std::to_string(f.ready) + "/" + std::to_string(f.desired) + " replicas ready");
  }
  void progressing(bool status, Reason reason, std::string message = "") {
    out.conditions[1] = {ConditionType::kProgressing, status, reason, std::move(message)};
  }
  void degraded(Reason reason, std::string message) {
    out.conditions[2] = {ConditionType::kDegraded, true, reason, std::move(message)};
  }
};

void derive_running(Builder& b, const RecipeFacts& f) {
  DerivedStatus& out = b.out;
  out.last_error = f.last_exit;
  if (!f.reconcile_error.empty()) {
    out.phase = RecipePhase::kDegraded;
    out.last_error = f.reconcile_error;
    b.ready_if_serving(Reason::kReconcileError);
    b.progressing(false, Reason::kReconcileError);
    b.degraded(Reason::kReconcileError, f.reconcile_error);
    return;
  }
  switch (f.model) {
    case ModelAvailability::kDownloading:
      out.phase = RecipePhase::kDownloading;
      b.ready_if_serving(Reason::kDownloading);
      b.progressing(true, Reason::kDownloading, f.model_message);
      return;
    case ModelAvailability::kFailed:
      out.phase = RecipePhase::kDegraded;
      out.last_error = f.model_message;
      b.ready_if_serving(Reason::kModelUnavailable);
      b.progressing(false, Reason::kModelUnavailable);
      b.degraded(Reason::kModelUnavailable, f.model_message);
      return;
    case ModelAvailability::kReady:
      break;
  }
  if (f.crash_loop) {
    out.phase = RecipePhase::kDegraded;
    b.ready_if_serving(Reason::kCrashLoopBackOff);
    b.progressing(true, Reason::kCrashLoopBackOff);
    b.degraded(Reason::kCrashLoopBackOff,
               // Kubernetes: the kubelet's back-off, of which the pod says nothing.
               f.retry_in.count() > 0
                   ? f.last_exit + "; restarting in " + std::to_string(f.retry_in.count()) + " s"
                   : f.last_exit);
    return;
  }
  if (f.desired == 0 && f.replicas == 0) {
    out.phase = RecipePhase::kScaledToZero;
    b.ready(true, Reason::kScaledToZero, "0/0 replicas ready");
    b.progressing(false, Reason::kScaledToZero, "a request starts a replica");
    return;
  }
  const Reason reason = f.outdated > 0                ? Reason::kRollingUpdate
                        : f.current_ready < f.desired ? Reason::kScalingUp
                        : f.replicas > f.desired      ? Reason::kScalingDown
                                                      : Reason::kReplicasReady;
  const bool progressing = reason != Reason::kReplicasReady;
  out.phase = progressing ? RecipePhase::kProgressing : RecipePhase::kReady;
  b.ready_if_serving(Reason::kNoReadyReplica);
  b.progressing(progressing, reason,
                std::to_string(f.current_ready) + " of " + std::to_string(f.desired) +
                    " replicas ready with generation " + std::to_string(f.generation));
}

}  // namespace

DerivedStatus derive_status(const RecipeFacts& f) {
  DerivedStatus out;
  Builder b{out, f};
  b.progressing(false, Reason::kReplicasReady);
  out.conditions[2] = {ConditionType::kDegraded, false, Reason::kAsExpected, ""};
  if (!f.has_valid_spec) {
    out.phase = RecipePhase::kInvalid;
    out.last_error = f.invalid_spec;
    b.ready(false, Reason::kInvalidSpec, "no valid spec to run");
    b.progressing(false, Reason::kInvalidSpec);
    b.degraded(Reason::kInvalidSpec, f.invalid_spec);
    return out;
  }
  if (f.deleted) {
    out.phase = RecipePhase::kTerminating;
    out.last_error = f.last_exit;
    b.ready(false, Reason::kTerminating, std::to_string(f.replicas) + " replicas draining");
    b.progressing(true, Reason::kTerminating, "the recipe was deleted");
    return out;
  }
  derive_running(b, f);
  if (!f.invalid_spec.empty()) {  // the last valid spec keeps running; the edit is reported
    out.phase = RecipePhase::kDegraded;
    out.last_error = f.invalid_spec;
    b.degraded(Reason::kInvalidSpec, f.invalid_spec);
  }
  return out;
}

const char* to_string(RecipePhase phase) {
  switch (phase) {
    case RecipePhase::kInvalid:
      return "Invalid";
    case RecipePhase::kDownloading:
      return "Downloading";
    case RecipePhase::kProgressing:
      return "Progressing";
    case RecipePhase::kReady:
      return "Ready";
    case RecipePhase::kDegraded:
      return "Degraded";
    case RecipePhase::kScaledToZero:
      return "ScaledToZero";
    case RecipePhase::kTerminating:
      return "Terminating";
  }
  return "Unknown";
}

const char* to_string(ConditionType type) {
  switch (type) {
    case ConditionType::kReady:
      return "Ready";
    case ConditionType::kProgressing:
      return "Progressing";
    case ConditionType::kDegraded:
      return "Degraded";
  }
  return "Unknown";
}

const char* to_string(ConditionReason reason) {
  switch (reason) {
    case Reason::kReplicasAvailable:
      return "ReplicasAvailable";
    case Reason::kNoReadyReplica:
      return "NoReadyReplica";
    case Reason::kScaledToZero:
      return "ScaledToZero";
    case Reason::kDownloading:
      return "Downloading";
    case Reason::kModelUnavailable:
      return "ModelUnavailable";
    case Reason::kCrashLoopBackOff:
      return "CrashLoopBackOff";
    case Reason::kInvalidSpec:
      return "InvalidSpec";
    case Reason::kReconcileError:
      return "ReconcileError";
    case Reason::kRollingUpdate:
      return "RollingUpdate";
    case Reason::kScalingUp:
      return "ScalingUp";
    case Reason::kScalingDown:
      return "ScalingDown";
    case Reason::kReplicasReady:
      return "ReplicasReady";
    case Reason::kTerminating:
      return "Terminating";
    case Reason::kAsExpected:
      return "AsExpected";
  }
  return "Unknown";
}

}  // namespace nibble::reconcile
