#pragma once
// What the router may send traffic to, published by the controller: for each recipe its served
// model name, its ready replicas, and whether a request without one should wait for one
// (replicas.min == 0, or replicas starting).
// Thread-safe; publish() wakes requests held for a recipe with no ready replica.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace nibble::router {

struct ReplicaEndpoint {
  std::string id;  // the controller's replica id, used in logs and in-flight counts
  int port = 0;
  std::string host = "127.0.0.1";
  // The replica's own key, sent upstream as `Authorization: Bearer <key>` in place of the
  // client's header (empty: none is sent). Internal: never shown to clients.
  std::string api_key;
};

struct RouteEntry {
  std::string recipe;
  std::string served_model_name;
  std::vector<ReplicaEndpoint> ready;
  bool scale_from_zero = false;  // replicas.min == 0: a request may wake the recipe
  bool starting = false;         // replicas are being started: hold requests rather than fail
};

class RouteTable {
 public:
  // Replaces the recipe's entry (keyed by entry.recipe).
  void publish(RouteEntry entry);
  void remove(const std::string& recipe);

  std::optional<RouteEntry> find_by_model(const std::string& served_model_name) const;
  std::optional<RouteEntry> find_by_recipe(const std::string& recipe) const;
  std::vector<RouteEntry> entries() const;

  // Blocks until the recipe has a ready replica (returns its entry) or the deadline passes or
  // the recipe is removed (returns nullopt).
  std::optional<RouteEntry> wait_for_ready(const std::string& recipe,
                                           std::chrono::steady_clock::time_point deadline) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, RouteEntry> by_recipe_;
};

}  // namespace nibble::router
