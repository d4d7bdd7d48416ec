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
  ASSERT_EQ(o.exits.size(), 2u);
  EXPECT_EQ(o.exits[0].replica_id, "e");  // oldest first
  EXPECT_EQ(o.exits[1].description, "Error (exit code 1)");
  EXPECT_FALSE(observe_pods({ready}, reading).crash_loop);
}

}  // namespace
}  // namespace nibble::kube
