#pragma once
// What the router may send traffic to, published by the controller: for each recipe its served
// model name, its ready replicas, whether a request without one should wait for one
// (replicas.min == 0, or replicas starting) or fail at once saying why none can come, and
// what /v1/models shows of the model.
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

// The engine's facts /v1/models shows beside the id, as the engine's own /v1/models does.
struct ModelCard {
  std::string root;       // the engine's "root"
  int max_model_len = 0;  // the engine's "max_model_len"; 0: not known yet (not shown)
};

struct RouteEntry {
  std::string recipe;
  std::string served_model_name;
  std::vector<ReplicaEndpoint> ready;
  bool scale_from_zero = false;  // replicas.min == 0: a request may wake the recipe
  bool starting = false;         // replicas are being started: hold requests rather than fail
  // Why no replica can come now (the weights cannot be fetched; every replica crash-looping),
  // with the last exit and log lines: while there is no ready replica, requests fail at once
  // with 503 and this message instead of being held. "" while one can come.
  std::string unavailable;
  ModelCard card;

  // A request for it is answered by a replica now or after a hold (/v1/models lists it).
  bool can_serve() const {
    return !ready.empty() || (unavailable.empty() && (scale_from_zero || starting));
  }
};

class RouteTable {
 public:
  // Replaces the recipe's entry (keyed by entry.recipe).
  void publish(RouteEntry entry);
  // Publishes the entry only when the recipe has none yet; false when it had one.
  bool publish_if_absent(RouteEntry entry);
  void remove(const std::string& recipe);

  std::optional<RouteEntry> find_by_model(const std::string& served_model_name) const;
  std::optional<RouteEntry> find_by_recipe(const std::string& recipe) const;
  std::vector<RouteEntry> entries() const;

  // Blocks until the recipe has a ready replica or cannot get one (RouteEntry::unavailable;
  // returns its entry) or the deadline passes or the recipe is removed (returns nullopt).
  std::optional<RouteEntry> wait_for_ready(const std::string& recipe,
                                           std::chrono::steady_clock::time_point deadline) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, RouteEntry> by_recipe_;
};

}  // namespace nibble::router
