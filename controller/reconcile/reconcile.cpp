#include "controller/reconcile/reconcile.h"

#include <algorithm>

namespace nibble::reconcile {

std::chrono::seconds restart_delay(int consecutive_failures, const BackoffPolicy& policy) {
  std::chrono::seconds delay = policy.initial;
  for (int i = 1; i < consecutive_failures && delay < policy.max; ++i) delay *= 2;
  return std::min(delay, policy.max);
}

Plan plan_replicas(const DesiredRecipe& desired, const std::vector<ObservedReplica>& observed,
                   Clock::time_point now, const BackoffPolicy& policy) {
  Plan plan;
  auto drain = [&](const ObservedReplica& r, const std::string& reason) {
    plan.actions.push_back({ActionKind::kDrain, r.id, reason});
  };

  // Exited replicas are cleared once their back-off has passed; a start below replaces them.
  int waiting_in_backoff = 0;
  for (const ObservedReplica& r : observed) {
    if (r.phase != ReplicaPhase::kExited) continue;
    const Clock::time_point retry_at = r.since + restart_delay(r.consecutive_failures, policy);
    if (desired.deleted || r.spec_hash != desired.spec_hash || now >= retry_at) {
      plan.actions.push_back(
          {ActionKind::kRemoveExited, r.id, "exited; restarting after back-off"});
    } else {
      ++waiting_in_backoff;
      plan.crash_loop = true;
      if (plan.next_wake == Clock::time_point{} || retry_at < plan.next_wake)
        plan.next_wake = retry_at;
    }
  }

  std::vector<const ObservedReplica*> current, old;
  int ready_current = 0, ready_old = 0;
  for (const ObservedReplica& r : observed) {
    if (r.phase == ReplicaPhase::kExited || r.phase == ReplicaPhase::kDraining) continue;
    const bool is_current = r.spec_hash == desired.spec_hash;
    (is_current ? current : old).push_back(&r);
    if (r.phase == ReplicaPhase::kReady) ++(is_current ? ready_current : ready_old);
  }

  if (desired.deleted) {
    for (const auto* r : current) drain(*r, "recipe deleted");
    for (const auto* r : old) drain(*r, "recipe deleted");
    return plan;
  }

  // Replicas in back-off still count as wanted: they are restarted, not replaced at once.
  const int have = int(current.size()) + waiting_in_backoff;
  const int surge = old.empty() ? 0 : 1;
  if (have < desired.replicas) {
    const int room =
        desired.replicas + surge - int(current.size() + old.size()) - waiting_in_backoff;
    const int starts = std::min(desired.replicas - have, std::max(room, 0));
    for (int i = 0; i < starts; ++i) {
      plan.actions.push_back(
          {ActionKind::kStart, "", old.empty() ? "scale up" : "rolling update: new spec"});
    }
  }

  // Rolling update: old replicas that serve nothing go at once; a ready old one goes only when
  // the ready replicas left are still enough (or the new spec alone is fully ready).
  int ready_total = ready_current + ready_old;
  for (const auto* r : old) {
    if (r->phase != ReplicaPhase::kReady) {
      drain(*r, "rolling update: not ready, replaced by the new spec");
    } else if (ready_total - 1 >= desired.replicas || ready_current >= desired.replicas) {
      drain(*r, "rolling update: replaced by a ready replica of the new spec");
      --ready_total;
    }
  }

  // Scale down: not-ready first, then the most recently started.
  if (int(current.size()) > desired.replicas) {
    std::vector<const ObservedReplica*> order = current;
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      const bool a_ready = a->phase == ReplicaPhase::kReady,
                 b_ready = b->phase == ReplicaPhase::kReady;
      if (a_ready != b_ready) return !a_ready;
      return a->since > b->since;
    });
    for (int i = 0; i < int(current.size()) - desired.replicas; ++i)
      drain(*order[std::size_t(i)], "scale down");
  }
  return plan;
}

}  // namespace nibble::reconcile
