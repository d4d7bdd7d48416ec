// Lease leader election against the API-server double: one leader among candidates, takeover
// after expiry, a leader that cannot renew steps down, release hands over at once.
#include <gtest/gtest.h>

#include <thread>

#include "controller/kube/leader_election.h"
#include "controller/kube/resource_path.h"
#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

LeaderElectionConfig fast(const std::string& identity) {
  LeaderElectionConfig c;
  c.namespace_name = "ns";
  c.lease_name = "nibble-controller";
  c.identity = identity;
  c.lease_duration_seconds = 1;
  c.renew_deadline = milliseconds(600);
  c.retry_period = milliseconds(50);
  return c;
}

Json lease(const testing::FakeApiServer& server) {
  return server.object("/apis/coordination.k8s.io/v1/leases", "ns", "nibble-controller").value();
}

TEST(LeaderElection, FirstCandidateCreatesTheLeaseAndOthersWaitForExpiry) {
  testing::FakeApiServer server;
  server.start();
  KubeConfig config;
  config.server = server.url();
  KubeClient client(config);
  LeaderElector a(client, fast("a")), b(client, fast("b"));
  EXPECT_TRUE(a.try_acquire_or_renew());
  Json l = lease(server);
  EXPECT_EQ(l["spec"]["holderIdentity"], "a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(l["spec"]["leaseTransitions"], 0);
  EXPECT_EQ(l["spec"]["acquireTime"], l["spec"]["renewTime"]);
  EXPECT_FALSE(b.try_acquire_or_renew());  // held, not expired
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(a.try_acquire_or_renew());  // renews
  EXPECT_NE(lease(server)["spec"]["renewTime"], l["spec"]["renewTime"]);
  EXPECT_EQ(lease(server)["spec"]["acquireTime"], l["spec"]["acquireTime"]);
  // a stops renewing; b sees the record unchanged for the lease duration and takes it.
  EXPECT_FALSE(b.try_acquire_or_renew());
  std::this_thread::sleep_for(milliseconds(1100));
  EXPECT_TRUE(b.try_acquire_or_renew());
  l = lease(server);
  EXPECT_EQ(l["spec"]["holderIdentity"], "b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
  EXPECT_FALSE(a.try_acquire_or_renew());  // a's view: b holds a fresh lease

  // A 409 on the write (another candidate won the race) is a lost attempt, not an error.
  server.fail_next("PUT", "/leases/", 409);
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_TRUE(b.try_acquire_or_renew());
  b.release();
  EXPECT_EQ(lease(server)["spec"]["holderIdentity"], "");
  EXPECT_TRUE(a.try_acquire_or_renew());  // a released lease is free at once
}

TEST(LeaderElection, OnlyOneLeadsAndAnotherTakesOverWhenTheLeaderCannotRenew) {
  testing::FakeApiServer server;
  server.start();
  struct Candidate {
    std::unique_ptr<KubeClient> client;
    std::unique_ptr<LeaderElector> elector;
    std::atomic<int> started{0}, stopped{0};
    std::thread thread;
    void run() {
      thread = std::thread([this] { elector->run([this] { ++started; }, [this] { ++stopped; }); });
    }
  };
  Candidate c[2];
  for (int i = 0; i < 2; ++i) {
    KubeConfig config;
    config.server = server.url();
    KubeClientOptions options;
    options.user_agent = i == 0 ? "ctl-first" : "ctl-second";  // to aim faults at one of them
    c[i].client = std::make_unique<KubeClient>(config, options);
    c[i].elector = std::make_unique<LeaderElector>(*c[i].client, fast(options.user_agent));
  }
  c[0].run();
  while (c[0].started == 0) std::this_thread::sleep_for(milliseconds(5));
  c[1].run();
  // Both campaign for longer than a lease duration: the leader renews, the other never leads.
  for (int i = 0; i < 60; ++i) {
    EXPECT_FALSE(c[1].elector->is_leader());
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(c[0].elector->is_leader());
  EXPECT_EQ(c[1].started, 0);

  // The leader loses the API server: every lease request of it fails. It stops leading after
  // renew_deadline, and the other takes over once the lease has not changed for its duration;
  // never are both leaders at once.
  server.fail_next("GET", "/leases/", 500, 100000, "ctl-first");
  const auto lost_at = std::chrono::steady_clock::now();
  bool both = false;
  while (c[1].started == 0 &&
         std::chrono::steady_clock::now() - lost_at < std::chrono::seconds(5)) {
    both |= c[0].elector->is_leader() && c[1].elector->is_leader();
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_FALSE(both);
  EXPECT_EQ(c[0].stopped, 1);
  EXPECT_EQ(c[1].started, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - lost_at, milliseconds(900));
  EXPECT_EQ(lease(server)["spec"]["holderIdentity"], "ctl-second");
  EXPECT_EQ(lease(server)["spec"]["leaseTransitions"], 1);

  // The old leader's API access comes back: it stays a follower.
  server.clear_faults();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(c[0].elector->is_leader());
  EXPECT_TRUE(c[1].elector->is_leader());
  for (Candidate& candidate : c) {
    candidate.elector->stop();
    candidate.thread.join();
  }
  EXPECT_EQ(c[1].stopped, 1);  // stop() while leading reports the end of leadership
}

}  // namespace
}  // namespace nibble::kube
