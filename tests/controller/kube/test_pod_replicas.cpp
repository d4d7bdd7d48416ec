// Reading replicas off Pods: phase, endpoint, restarts, errors and exits.
#include <gtest/gtest.h>

#include "controller/kube/pod_replicas.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using reconcile::ReplicaPhase;

Json pod(const std::string& name, const Json& status, const Json& extra_meta = Json::object()) {
  Json meta = {{"name", name}, {"labels", {{"nibble.dev/revision", "r1"}}}};
  meta.update(extra_meta);
  return {{"metadata", meta}, {"status", status}};
}

TEST(PodReplicas, PhaseFromConditionsDeletionAndContainerState) {
  const PodReading reading;
  const Json ready = pod("a", {{"phase", "Running"},
                               {"podIP", "10.0.0.7"},
                               {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}});
  const reconcile::ReplicaView v = replica_from_pod(ready, reading);
  EXPECT_EQ(v.id, "a");
  EXPECT_EQ(v.revision, "r1");
  EXPECT_EQ(v.phase, ReplicaPhase::kReady);
  EXPECT_EQ(v.endpoint.host, "10.0.0.7");
  EXPECT_EQ(v.endpoint.port, 8000);

  const Json pending = pod("b", {{"phase", "Pending"}});
  EXPECT_EQ(replica_from_pod(pending, reading).phase, ReplicaPhase::kStarting);
  EXPECT_EQ(replica_from_pod(pending, reading).endpoint.port, 0);  // no IP yet

  const Json deleting = pod("c", ready["status"], {{"deletionTimestamp", "2026-11-26T08:00:00Z"}});
  EXPECT_EQ(replica_from_pod(deleting, reading).phase, ReplicaPhase::kDraining);

  const Json crashing = pod(
      "d",
      {{"phase", "Running"},
       {"containerStatuses",
        {{{"name", "sidecar"}, {"restartCount", 0}},
         {{"name", "engine"},
          {"restartCount", 4},
          {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 40s"}}}}},
          {"lastState",
           {{"terminated",
             {{"reason", "Error"}, {"exitCode", 1}, {"finishedAt", "2026-11-26T08:00:01Z"}}}}}}}}});
  const reconcile::ReplicaView c = replica_from_pod(crashing, reading);
  EXPECT_EQ(c.phase, ReplicaPhase::kExited);
  EXPECT_EQ(c.restarts, 4);  // the engine container's, not the sidecar's
  EXPECT_EQ(c.last_error, "CrashLoopBackOff: back-off 40s");

  const Json oom = pod("e", {{"phase", "Running"},
                             {"conditions", {{{"type", "Ready"}, {"status", "False"}}}},
                             {"containerStatuses",
                              {{{"name", "engine"},
                                {"restartCount", 1},
                                {"lastState",
                                 {{"terminated",
                                   {{"reason", "OOMKilled"},
                                    {"exitCode", 137},
                                    {"finishedAt", "2026-11-26T07:59:00Z"}}}}}}}}});
  EXPECT_EQ(replica_from_pod(oom, reading).phase, ReplicaPhase::kStarting);
  EXPECT_EQ(replica_from_pod(oom, reading).last_error, "OOMKilled (exit code 137)");

  const reconcile::RecipeObservation o = observe_pods({ready, crashing, oom}, reading);
  EXPECT_EQ(o.replicas.size(), 3u);
  EXPECT_TRUE(o.crash_loop);
  ASSERT_EQ(o.exits.size(), 3u);
  EXPECT_EQ(o.exits[0].replica_id, "e");  // oldest first
  EXPECT_EQ(o.exits[1].description, "Error (exit code 1)");
  // Then the failing pod's reason, so status names why it does not come back.
  EXPECT_EQ(o.exits[2].description,
            "container engine of pod d: CrashLoopBackOff after Error (exit code 1)");
  EXPECT_FALSE(observe_pods({ready}, reading).crash_loop);
}

Json with_container(Json pod, const char* list, const Json& container) {
  pod["status"][list].push_back(container);
  return pod;
}

// The engine's last log lines come off the pod: FallbackToLogsOnError leaves the log's tail as
// the termination message, of which the exits keep the last five lines (the description stays
// one line).
TEST(PodReplicas, ExitsCarryTheLastLinesOfTheTerminationMessage) {
  std::string log;
  for (int i = 1; i <= 80; ++i) log += "line " + std::to_string(i) + "\n";
  log += "\n";
  const Json crashing = pod(
      "d", {{"phase", "Running"},
            {"containerStatuses",
             {{{"name", "engine"},
               {"restartCount", 3},
               {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
               {"lastState",
                {{"terminated", {{"reason", "Error"}, {"exitCode", 1}, {"message", log}}}}}}}}});
  EXPECT_EQ(replica_from_pod(crashing, PodReading{}).last_error, "CrashLoopBackOff");
  const reconcile::RecipeObservation o = observe_pods({crashing}, PodReading{});
  ASSERT_EQ(o.exits.size(), 2u);
  EXPECT_EQ(o.exits[0].description, "Error (exit code 1)");
  const std::string tail = "line 76\nline 77\nline 78\nline 79\nline 80\n";
  EXPECT_EQ(o.exits[0].last_log_lines, tail);
  // The failing pod's entry, which the router quotes, carries them too.
  EXPECT_EQ(o.exits[1].description,
            "container engine of pod d: CrashLoopBackOff after Error (exit code 1)");
  EXPECT_EQ(o.exits[1].last_log_lines, tail);
  // A short message is kept whole; none gives none.
  Json short_log = crashing;
  short_log["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] = "oops";
  EXPECT_EQ(observe_pods({short_log}, PodReading{}).exits[0].last_log_lines, "oops\n");
  Json no_log = crashing;
  no_log["status"]["containerStatuses"][0]["lastState"]["terminated"].erase("message");
  EXPECT_EQ(observe_pods({no_log}, PodReading{}).exits[0].last_log_lines, "");
}

// Waiting reasons after which the kubelet only backs off fail the pod, in the engine or in the
// model download; a crash loop after an OOM kill is reported as OOMKilled.
TEST(PodReplicas, FailuresFromWaitingReasonsAndTheLastExit) {
  const Json running = pod("p", {{"phase", "Running"}});
  EXPECT_EQ(pod_failure(running).reason, "");
  const Json pull = with_container(
      running, "containerStatuses",
      {{"name", "engine"},
       {"state", {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "no such image"}}}}}});
  EXPECT_EQ(pod_failure(pull).reason, "ImagePullBackOff");
  EXPECT_EQ(pod_failure(pull).message,
            "container engine of pod p: ImagePullBackOff: no such image");
  const Json oom = with_container(
      running, "containerStatuses",
      {{"name", "engine"},
       {"restartCount", 5},
       {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
       {"lastState", {{"terminated", {{"reason", "OOMKilled"}, {"exitCode", 137}}}}}});
  EXPECT_EQ(pod_failure(oom).reason, "OOMKilled");
  EXPECT_EQ(pod_failure(oom).message,
            "container engine of pod p: CrashLoopBackOff after OOMKilled (exit code 137)");
  const Json download =
      with_container(pod("q", {{"phase", "Pending"}}), "initContainerStatuses",
                     {{"name", "model-download"},
                      {"restartCount", 2},
                      {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
                      {"lastState", {{"terminated", {{"reason", "Error"}, {"exitCode", 1}}}}}});
  EXPECT_EQ(pod_failure(download).reason, "CrashLoopBackOff");
  const Json starting = with_container(
      running, "containerStatuses",
      {{"name", "engine"}, {"state", {{"waiting", {{"reason", "ContainerCreating"}}}}}});
  EXPECT_EQ(pod_failure(starting).reason, "");
  EXPECT_TRUE(observe_pods({oom}, PodReading{}).crash_loop);
  EXPECT_TRUE(observe_pods({pull}, PodReading{}).crash_loop);
  EXPECT_TRUE(observe_pods({download}, PodReading{}).crash_loop);
  EXPECT_FALSE(observe_pods({starting}, PodReading{}).crash_loop);
}

// Downloading: some pod's model-download init container has not finished and no pod is ready.
TEST(PodReplicas, DownloadingWhileTheInitContainerRunsAndNoneIsReady) {
  const PodReading reading;
  const Json fetching =
      with_container(pod("a", {{"phase", "Pending"}}), "initContainerStatuses",
                     {{"name", "model-download"}, {"state", {{"running", {{"startedAt", "t"}}}}}});
  EXPECT_TRUE(pod_downloading(fetching, reading));
  const reconcile::RecipeObservation o = observe_pods({fetching}, reading);
  EXPECT_TRUE(o.downloading);
  EXPECT_EQ(o.downloading_message, "pod a downloads the model");
  EXPECT_FALSE(o.crash_loop);

  const Json queued = with_container(
      pod("b", {{"phase", "Pending"}}), "initContainerStatuses",
      {{"name", "model-download"}, {"state", {{"waiting", {{"reason", "PodInitializing"}}}}}});
  EXPECT_TRUE(pod_downloading(queued, reading));
  const Json done =
      with_container(pod("c", {{"phase", "Running"}}), "initContainerStatuses",
                     {{"name", "model-download"},
                      {"state", {{"terminated", {{"reason", "Completed"}, {"exitCode", 0}}}}}});
  EXPECT_FALSE(pod_downloading(done, reading));
  const Json failing = with_container(
      pod("d", {{"phase", "Pending"}}), "initContainerStatuses",
      {{"name", "model-download"}, {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}}});
  EXPECT_FALSE(pod_downloading(failing, reading));
  const Json deleted =
      pod("e", fetching["status"], {{"deletionTimestamp", "2026-12-06T00:00:00Z"}});
  EXPECT_FALSE(pod_downloading(deleted, reading));

  EXPECT_EQ(observe_pods({fetching, queued}, reading).downloading_message,
            "pod a downloads the model (and 1 more)");
  const Json ready =
      pod("r", {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}});
  EXPECT_FALSE(observe_pods({fetching, ready}, reading).downloading);  // a scale-up, not a download
  EXPECT_FALSE(observe_pods({done}, reading).downloading);

  // A draft model's init container (model-download-draft) downloads after the model's is done.
  const Json drafting = with_container(
      done, "initContainerStatuses",
      {{"name", "model-download-draft"}, {"state", {{"running", {{"startedAt", "t"}}}}}});
  EXPECT_TRUE(pod_downloading(drafting, reading));
  const Json both_done =
      with_container(done, "initContainerStatuses",
                     {{"name", "model-download-draft"},
                      {"state", {{"terminated", {{"reason", "Completed"}, {"exitCode", 0}}}}}});
  EXPECT_FALSE(pod_downloading(both_done, reading));
  const Json other = with_container(
      done, "initContainerStatuses",
      {{"name", "model-downloader"}, {"state", {{"running", {{"startedAt", "t"}}}}}});
  EXPECT_FALSE(pod_downloading(other, reading));  // not a name of ours
}

}  // namespace
}  // namespace nibble::kube
