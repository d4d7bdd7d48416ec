#include "controller/kube/pod_replicas.h"

#include <algorithm>

namespace nibble::kube {

using Json = nlohmann::json;

namespace {

constexpr int kExitLogLines = 5;  // of a failed container's log tail, quoted by the router

// The engine container's status: the one named "engine", else the first.
Json engine_container(const Json& pod) {
  const Json status = pod.value("status", Json::object());
  const Json containers = status.value("containerStatuses", Json::array());
  for (const Json& c : containers) {
    if (c.value("name", "") == "engine") return c;
  }
  return containers.empty() ? Json::object() : containers[0];
}

bool condition_true(const Json& pod, const std::string& type) {
  for (const Json& c : pod.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

// Waiting reasons after which the kubelet only backs off: the pod will not serve by itself.
bool failing_waiting_reason(const std::string& reason) {
  return reason == "CrashLoopBackOff" || reason == "ImagePullBackOff" || reason == "ErrImagePull" ||
         reason == "CreateContainerConfigError" || reason == "InvalidImageName";
}

Json pod_status_list(const Json& pod, const char* field) {
  return pod.value("status", Json::object()).value(field, Json::array());
}

// The reason and exit code. The message is left out: with FallbackToLogsOnError it is up to
// 80 lines of the container's log, which go to the exit's last_log_lines instead.
std::string termination_text(const Json& terminated) {
  std::string text = terminated.value("reason", "Terminated");
  if (terminated.contains("exitCode")) {
    text += " (exit code " + std::to_string(terminated.value("exitCode", 0)) + ")";
  }
  return text;
}

// The last lines of a termination message (the container's log tail, at most a few KB),
// '\n'-separated, blank lines left out.
std::string last_lines(const std::string& text, int count) {
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    if (nl > at) lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  std::string out;
  for (std::size_t i = lines.size() > std::size_t(count) ? lines.size() - count : 0;
       i < lines.size(); ++i) {
    out += lines[i] + "\n";
  }
  return out;
}

}  // namespace

reconcile::ReplicaView replica_from_pod(const Json& pod, const PodReading& reading) {
  reconcile::ReplicaView view;
  const Json meta = pod.value("metadata", Json::object());
  const Json status = pod.value("status", Json::object());
  view.id = meta.value("name", "");
  view.revision = meta.value("labels", Json::object()).value(reading.revision_label, "");
  const Json engine = engine_container(pod);
  view.restarts = engine.value("restartCount", 0);
  const Json waiting = engine.value("state", Json::object()).value("waiting", Json());
  const Json last_terminated =
      engine.value("lastState", Json::object()).value("terminated", Json());
  const std::string pod_phase = status.value("phase", "Pending");
  if (meta.contains("deletionTimestamp")) {
    view.phase = reconcile::ReplicaPhase::kDraining;
  } else if (pod_phase == "Failed" || pod_phase == "Succeeded" ||
             (waiting.is_object() && waiting.value("reason", "") == "CrashLoopBackOff")) {
    view.phase = reconcile::ReplicaPhase::kExited;
  } else if (condition_true(pod, "Ready")) {
    view.phase = reconcile::ReplicaPhase::kReady;
  } else {
    view.phase = reconcile::ReplicaPhase::kStarting;
  }
  view.endpoint.host = status.value("podIP", "");
  if (!view.endpoint.host.empty()) view.endpoint.port = reading.engine_port;
  if (waiting.is_object() && waiting.value("reason", "") != "ContainerCreating") {
    view.last_error = waiting.value("reason", "");
    const std::string message = waiting.value("message", "");
    if (!message.empty()) view.last_error += ": " + message;
  } else if (last_terminated.is_object()) {
    view.last_error = termination_text(last_terminated);
  }
  if (pod_phase == "Failed" && view.last_error.empty()) {
    view.last_error = status.value("reason", "Failed");
  }
  return view;
}

PodFailure pod_failure(const Json& pod) {
  for (const char* field : {"initContainerStatuses", "containerStatuses"}) {
    for (const Json& c : pod_status_list(pod, field)) {
      const Json waiting = c.value("state", Json::object()).value("waiting", Json());
      if (!waiting.is_object()) continue;
      const std::string reason = waiting.value("reason", "");
      if (!failing_waiting_reason(reason)) continue;
      PodFailure f{reason, "container " + c.value("name", "") + " of pod " +
                               pod["metadata"].value("name", "") + ": " + reason};
      const Json last = c.value("lastState", Json::object()).value("terminated", Json());
      if (last.is_object()) {
        // The cause of a crash loop is the last exit: OOMKilled is the one users act on.
        if (last.value("reason", "") == "OOMKilled") f.reason = "OOMKilled";
        f.message += " after " + termination_text(last);
      } else if (!waiting.value("message", "").empty()) {
        f.message += ": " + waiting.value("message", "");
      }
      return f;
    }
  }
  return {};
}

bool pod_downloading(const Json& pod, const PodReading& reading) {
  if (pod.value("metadata", Json::object()).contains("deletionTimestamp")) return false;
  for (const Json& c : pod_status_list(pod, "initContainerStatuses")) {
    const std::string name = c.value("name", "");
    if (name != reading.download_container && !name.starts_with(reading.download_container + "-"))
      continue;
    const Json state = c.value("state", Json::object());
    if (state.contains("running")) return true;
    if (state.contains("waiting")) {
      return !failing_waiting_reason(state["waiting"].value("reason", ""));
    }
    // terminated: done (exit 0), or failed and about to be restarted; the next may download
  }
  return false;
}

reconcile::RecipeObservation observe_pods(const std::vector<Json>& pods,
                                          const PodReading& reading) {
  reconcile::RecipeObservation observation;
  std::vector<std::pair<std::string, reconcile::ReplicaExit>> exits;  // by finishedAt
  std::vector<reconcile::ReplicaExit> failures;
  std::vector<std::string> downloading;
  bool any_ready = false;
  for (const Json& pod : pods) {
    reconcile::ReplicaView view = replica_from_pod(pod, reading);
    const Json engine = engine_container(pod);
    const Json terminated = engine.value("lastState", Json::object()).value("terminated", Json());
    std::string log_lines;
    if (terminated.is_object()) {
      reconcile::ReplicaExit exit;
      exit.replica_id = view.id;
      exit.description = termination_text(terminated);
      log_lines = last_lines(terminated.value("message", ""), kExitLogLines);
      exit.last_log_lines = log_lines;
      exits.emplace_back(terminated.value("finishedAt", ""), exit);
    }
    if (PodFailure failure = pod_failure(pod); !failure.reason.empty()) {
      observation.crash_loop = true;
      failures.push_back({view.id, failure.message, {}, log_lines});
    }
    if (view.phase == reconcile::ReplicaPhase::kReady) any_ready = true;
    if (pod_downloading(pod, reading)) downloading.push_back(view.id);
    observation.replicas.push_back(std::move(view));
  }
  std::stable_sort(exits.begin(), exits.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [at, exit] : exits) observation.exits.push_back(std::move(exit));
  for (auto& failure : failures) observation.exits.push_back(std::move(failure));
  if (!any_ready && !downloading.empty()) {
    observation.downloading = true;
    observation.downloading_message = "pod " + downloading.front() + " downloads the model";
    if (downloading.size() > 1)
      observation.downloading_message +=
          " (and " + std::to_string(downloading.size() - 1) + " more)";
  }
  return observation;
}

}  // namespace nibble::kube
