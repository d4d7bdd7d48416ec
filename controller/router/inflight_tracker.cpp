#include "controller/router/inflight_tracker.h"

#include <climits>
#include <vector>

namespace nibble::router {

void InflightTracker::begin_request(const std::string& recipe) {
  std::lock_guard lock(mutex_);
  RecipeLoad& load = by_recipe_[recipe];
  ++load.requests;
  load.last_request = Clock::now();
}

void InflightTracker::end_request(const std::string& recipe) {
  std::lock_guard lock(mutex_);
  RecipeLoad& load = by_recipe_[recipe];
  if (load.requests > 0) --load.requests;
  // Idle time counts from the end of the last answer, so a long stream never looks idle.
  load.last_request = Clock::now();
}

void InflightTracker::begin_hold(const std::string& recipe) {
  std::lock_guard lock(mutex_);
  ++by_recipe_[recipe].held;
}

void InflightTracker::end_hold(const std::string& recipe) {
  std::lock_guard lock(mutex_);
  RecipeLoad& load = by_recipe_[recipe];
  if (load.held > 0) --load.held;
}

std::optional<ReplicaEndpoint> InflightTracker::acquire(const RouteEntry& entry,
                                                        const std::set<std::string>& tried) {
  std::lock_guard lock(mutex_);
  RecipeLoad& load = by_recipe_[entry.recipe];
  int fewest = INT_MAX;
  std::vector<const ReplicaEndpoint*> least_loaded;
  for (const ReplicaEndpoint& replica : entry.ready) {
    if (tried.contains(replica.id)) continue;
    const auto it = load.per_replica.find(replica.id);
    const int count = it == load.per_replica.end() ? 0 : it->second;
    if (count < fewest) {
      fewest = count;
      least_loaded.clear();
    }
    if (count == fewest) least_loaded.push_back(&replica);
  }
  if (least_loaded.empty()) return std::nullopt;
  // The tie counter moves only on a real tie, so a retry (one candidate left) does not skew
  // the rotation of the next requests.
  const std::size_t pick = least_loaded.size() == 1 ? 0 : load.next_tie++ % least_loaded.size();
  const ReplicaEndpoint& chosen = *least_loaded[pick];
  ++load.per_replica[chosen.id];
  return chosen;
}

void InflightTracker::release(const std::string& recipe, const std::string& replica_id) {
  std::lock_guard lock(mutex_);
  RecipeLoad& load = by_recipe_[recipe];
  const auto it = load.per_replica.find(replica_id);
  if (it == load.per_replica.end()) return;
  // Forget replicas with nothing in flight, so ids of replaced replicas do not accumulate.
  if (--it->second <= 0) load.per_replica.erase(it);
}

int InflightTracker::requests(const std::string& recipe) const {
  std::lock_guard lock(mutex_);
  const auto it = by_recipe_.find(recipe);
  return it == by_recipe_.end() ? 0 : it->second.requests;
}

int InflightTracker::held(const std::string& recipe) const {
  std::lock_guard lock(mutex_);
  const auto it = by_recipe_.find(recipe);
  return it == by_recipe_.end() ? 0 : it->second.held;
}

int InflightTracker::replica_inflight(const std::string& recipe,
                                      const std::string& replica_id) const {
  std::lock_guard lock(mutex_);
  const auto it = by_recipe_.find(recipe);
  if (it == by_recipe_.end()) return 0;
  const auto replica = it->second.per_replica.find(replica_id);
  return replica == it->second.per_replica.end() ? 0 : replica->second;
}

InflightTracker::Clock::time_point InflightTracker::last_request(const std::string& recipe) const {
  std::lock_guard lock(mutex_);
  const auto it = by_recipe_.find(recipe);
  return it == by_recipe_.end() ? Clock::time_point{} : it->second.last_request;
}

}  // namespace nibble::router
