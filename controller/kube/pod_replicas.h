#pragma once
// Reading a recipe's replicas off its Pods: the one vocabulary of replica_backend.h from the
// Pod API's fields. Pure (JSON in, views out), so each rule is unit-tested.
//   phase     kDraining when deletionTimestamp is set; kExited when the pod Failed or
//             Succeeded or its engine container waits after an exit (CrashLoopBackOff);
//             kReady when the Ready condition is True; kStarting otherwise
//   endpoint  status.podIP and the engine container's port
//   restarts  the engine container's restartCount; last_error its waiting reason and message
//             or its last termination (reason, exit code)
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "controller/reconcile/replica_backend.h"

namespace nibble::kube {

struct PodReading {
  std::string revision_label = "nibble.dev/revision";
  int engine_port = 8000;
};

reconcile::ReplicaView replica_from_pod(const nlohmann::json& pod, const PodReading& reading);
// Every pod's view, crash_loop when any waits in CrashLoopBackOff, and the pods' last
// terminations as exits (oldest first).
reconcile::RecipeObservation observe_pods(const std::vector<nlohmann::json>& pods,
                                          const PodReading& reading);

}  // namespace nibble::kube
