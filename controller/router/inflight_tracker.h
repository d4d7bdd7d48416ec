#pragma once
// Requests in flight through this router, per recipe (what the autoscaler reads) and per
// replica (what balancing reads), and the replica choice itself: the ready replica with the
// fewest requests in flight, ties broken round-robin. Choosing and counting happen under one
// lock, so concurrent requests spread over replicas instead of all seeing the same minimum.
// Thread-safe.
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "controller/router/route_table.h"

namespace nibble::router {

class InflightTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // A client request for the recipe arrived / was answered; both update last_request().
  void begin_request(const std::string& recipe);
  void end_request(const std::string& recipe);
  // The request waits for a ready replica (it also counts in requests()).
  void begin_hold(const std::string& recipe);
  void end_hold(const std::string& recipe);

  // The least loaded ready replica of `entry` whose id is not in `tried`, now counted in flight
  // (give it back with release()); nullopt when every ready replica was tried.
  std::optional<ReplicaEndpoint> acquire(const RouteEntry& entry,
                                         const std::set<std::string>& tried);
  void release(const std::string& recipe, const std::string& replica_id);

  int requests(const std::string& recipe) const;  // forwarded + held
  int held(const std::string& recipe) const;
  int replica_inflight(const std::string& recipe, const std::string& replica_id) const;
  Clock::time_point last_request(const std::string& recipe) const;  // epoch if never

 private:
  struct RecipeLoad {
    int requests = 0;
    int held = 0;
    Clock::time_point last_request{};
    std::map<std::string, int> per_replica;
    unsigned long long next_tie = 0;  // round-robin among equally loaded replicas
  };

  mutable std::mutex mutex_;
  std::map<std::string, RecipeLoad> by_recipe_;
};

}  // namespace nibble::router
