#pragma once
// The reconcile core: desired state (a recipe's spec hash and replica count) against observed
// replicas → the actions that converge them. Pure: no processes, no clocks read, no I/O, so
// every rule is unit-tested (kubebuilder's level-triggered reconcile: the whole difference is
// recomputed every pass, so a missed event or a controller restart loses nothing).
//
// Rules, in order:
//   - a replica that exited is restarted after an exponential back-off (1 s doubling to 5 min,
//     reset once a replica stays ready for 10 minutes), shown as CrashLoopBackOff meanwhile;
//   - a spec change rolls: one replica of the new spec is started beyond the desired count,
//     and an old one is drained only when a new one is ready (never fewer ready than before);
//   - scale up starts replicas; scale down drains not-ready ones first, then the newest;
//   - a deleted recipe drains all its replicas.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace nibble::reconcile {

using Clock = std::chrono::steady_clock;

enum class ReplicaPhase { kStarting, kReady, kExited, kDraining };

struct ObservedReplica {
  std::string id;
  std::string spec_hash;
  ReplicaPhase phase = ReplicaPhase::kStarting;
  Clock::time_point since{};     // when it entered this phase
  int consecutive_failures = 0;  // exits without a 10-minute ready stretch in between
};

struct DesiredRecipe {
  std::string name;
  std::string spec_hash;
  int replicas = 1;  // already clamped to [min, max] by the autoscaler
  bool deleted = false;
};

enum class ActionKind { kStart, kDrain, kRemoveExited };

struct Action {
  ActionKind kind;
  std::string replica_id;  // empty for kStart
  std::string reason;
};

struct BackoffPolicy {
  std::chrono::seconds initial{1};
  std::chrono::seconds max{300};
  std::chrono::seconds reset_after_ready{600};
};

// The wait before restarting a replica that failed `consecutive_failures` times.
std::chrono::seconds restart_delay(int consecutive_failures, const BackoffPolicy& policy);

struct Plan {
  std::vector<Action> actions;
  bool crash_loop = false;        // some replica waits in back-off
  Clock::time_point next_wake{};  // when a back-off ends (zero when none)
};

Plan plan_replicas(const DesiredRecipe& desired, const std::vector<ObservedReplica>& observed,
                   Clock::time_point now, const BackoffPolicy& policy = {});

}  // namespace nibble::reconcile
