#pragma once
// Reading a recipe's replicas off its Pods: the one vocabulary of replica_backend.h from the
// Pod API's fields. Pure (JSON in, views out), so each rule is unit-tested.
//   phase     kDraining when deletionTimestamp is set; kExited when the pod Failed or
//             Succeeded or its engine container waits after an exit (CrashLoopBackOff);
//             kReady when the Ready condition is True; kStarting otherwise
//   endpoint  status.podIP and the engine container's port
//   restarts  the engine container's restartCount; last_error its waiting reason and message
//             or its last termination (reason, exit code)
//   failing   why a pod cannot serve and will not by waiting: a container (engine or the
//             model download) waits in CrashLoopBackOff, ImagePullBackOff, ErrImagePull,
//             CreateContainerConfigError or InvalidImageName (reason OOMKilled when the
//             container's last exit was one)
//   downloading  a model-download init container (the model's, or a draft model's
//             model-download-draft) has not finished (running, or waiting to start without an
//             error)
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "controller/reconcile/replica_backend.h"

namespace nibble::kube {

struct PodReading {
  std::string revision_label = "nibble.dev/revision";
  int engine_port = 8000;
  // The init container that fetches weights, and the prefix (with '-') of those fetching more.
  std::string download_container = "model-download";
};

// Why a pod fails (see above): the reason ("CrashLoopBackOff", "ImagePullBackOff", "OOMKilled",
// ...) and a message naming the container; reason "" when it does not fail.
struct PodFailure {
  std::string reason;
  std::string message;
};
PodFailure pod_failure(const nlohmann::json& pod);
// True while the pod's model download has not completed (and the pod is not deleted).
bool pod_downloading(const nlohmann::json& pod, const PodReading& reading);

reconcile::ReplicaView replica_from_pod(const nlohmann::json& pod, const PodReading& reading);
// Every pod's view; crash_loop when any pod fails (pod_failure), downloading when none is ready
// and some pod still downloads; the pods' last terminations as exits (oldest first), then each
// failing pod's reason, so status names the latest. Each exit's last_log_lines are the last
// lines of the engine container's termination message (its log tail: the containers run with
// terminationMessagePolicy FallbackToLogsOnError).
reconcile::RecipeObservation observe_pods(const std::vector<nlohmann::json>& pods,
                                          const PodReading& reading);

}  // namespace nibble::kube
