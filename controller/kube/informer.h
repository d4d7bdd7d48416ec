#pragma once
// An informer for one resource collection, as client-go's reflector + store: list, then watch
// from the list's resourceVersion; bookmarks advance the resourceVersion; a 410 Gone (the
// version was compacted away) makes a full re-list whose differences with the cache are
// reported as changes, so nothing is lost across a gap; a dropped or failed watch reconnects
// after an exponential back-off with jitter. The local cache answers get/list without calls.
//
// on_change runs on the informer's thread for each object added, modified or deleted (after
// the cache is updated); it should only enqueue work.
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "controller/kube/kube_client.h"

namespace nibble::kube {

struct InformerOptions {
  std::string label_selector;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  std::uint32_t jitter_seed = 1;
};

enum class ChangeType { kAdded, kModified, kDeleted };

struct ObjectChange {
  ChangeType type;
  std::string key;  // namespace/name
  const nlohmann::json& object;
};

struct InformerStats {
  int lists = 0;     // successful lists (1 + re-lists)
  int watches = 0;   // watch requests started
  int gone = 0;      // 410s answered with a re-list
  int failures = 0;  // failed lists or watches (each followed by a back-off)
  int bookmarks = 0;
};

class Informer {
 public:
  using ChangeHandler = std::function<void(const ObjectChange&)>;
  Informer(const KubeClient& client, std::string collection_path, InformerOptions options,
           ChangeHandler on_change);

  // Lists and watches until stop() is called.
  void run();
  void stop();

  bool synced() const { return synced_.load(); }  // the first list is in the cache
  std::optional<nlohmann::json> get(const std::string& key) const;
  std::vector<nlohmann::json> list() const;
  std::vector<std::string> keys() const;
  std::string resource_version() const;
  InformerStats stats() const;

 private:
  void relist();
  void watch_once();
  void apply_event(const WatchEvent& event);
  void sleep_backoff();

  const KubeClient& client_;
  std::string path_;
  InformerOptions options_;
  ChangeHandler on_change_;
  std::mt19937 jitter_;
  std::chrono::milliseconds backoff_;

  mutable std::mutex mutex_;  // guards cache_, resource_version_, stats_
  std::map<std::string, nlohmann::json> cache_;
  std::string resource_version_;
  InformerStats stats_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};
  bool need_list_ = true;
  WatchCancel cancel_;
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

// "namespace/name" of an object.
std::string key_of(const nlohmann::json& object);

}  // namespace nibble::kube
