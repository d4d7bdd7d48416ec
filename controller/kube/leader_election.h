#pragma once
// Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection:
//   - a candidate takes the Lease when it does not exist, names no holder, or its record
//     (holderIdentity, renewTime, ...) has not changed for leaseDurationSeconds as measured on
//     this candidate's own clock (so clock skew between replicas does not matter);
//   - taking it sets holderIdentity, acquireTime, renewTime and leaseTransitions + 1;
//     the leader renews renewTime every retry period;
//   - every write is a PUT carrying the resourceVersion read (optimistic concurrency): a 409
//     means another candidate won the race, and the attempt is simply retried next period;
//   - a leader that cannot renew within renew_deadline stops leading (on_stopped_leading) before
//     its lease could expire for others, so two leaders never reconcile at once;
//   - release() on shutdown empties holderIdentity so that another replica takes over at once.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "controller/kube/kube_client.h"

namespace nibble::kube {

struct LeaderElectionConfig {
  std::string namespace_name;
  std::string lease_name = "nibble-controller";
  std::string identity;  // unique per candidate: the pod name (+ a random suffix)
  int lease_duration_seconds = 15;
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  using Clock = std::chrono::steady_clock;
  LeaderElector(const KubeClient& client, LeaderElectionConfig config);

  // Campaigns and renews until stop(); calls on_started when it becomes the leader and
  // on_stopped when it loses the lease (and once more at stop() if it still leads).
  void run(const std::function<void()>& on_started, const std::function<void()>& on_stopped);
  void stop();
  bool is_leader() const { return leader_.load(); }
  const std::string& identity() const { return config_.identity; }

  // One attempt to acquire or renew; true when this candidate holds the Lease after it.
  bool try_acquire_or_renew();
  // Gives the Lease up if held (empties holderIdentity).
  void release();

 private:
  std::string lease_path() const;

  const KubeClient& client_;
  LeaderElectionConfig config_;
  std::atomic<bool> leader_{false};
  std::atomic<bool> stopping_{false};
  // The last record seen of another holder and when it was first seen unchanged.
  std::string observed_record_;
  Clock::time_point observed_at_{};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

// RFC 3339 with microseconds (metav1.MicroTime), UTC.
std::string micro_time_now();

}  // namespace nibble::kube
