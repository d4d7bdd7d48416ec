#include "controller/kube/informer.h"

#include <spdlog/spdlog.h>

#include "controller/kube/resource_path.h"

namespace nibble::kube {

using Json = nlohmann::json;

std::string key_of(const Json& object) {
  const Json& meta = object.contains("metadata") ? object["metadata"] : Json::object();
  return object_key(meta.value("namespace", ""), meta.value("name", ""));
}

namespace {

std::string version_of(const Json& object) {
  if (!object.contains("metadata")) return "";
  return object["metadata"].value("resourceVersion", "");
}

}  // namespace

Informer::Informer(const KubeClient& client, std::string collection_path, InformerOptions options,
                   ChangeHandler on_change)
    : client_(client),
      path_(std::move(collection_path)),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      jitter_(options_.jitter_seed),
      backoff_(options_.initial_backoff) {}

void Informer::run() {
  while (!stopping_) {
    try {
      if (need_list_) relist();
      watch_once();
      backoff_ = options_.initial_backoff;  // a watch that ran normally resets the back-off
    } catch (const KubeError& e) {
      if (stopping_) break;
      if (e.gone()) {
        // Our resourceVersion is older than the server keeps: list again at once.
        spdlog::info("watch {}: {} ; re-listing", path_, e.what());
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.gone;
        need_list_ = true;
        continue;
      }
      spdlog::warn("watch {}: {}; retrying in {} ms", path_, e.what(), backoff_.count());
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.failures;
      }
      sleep_backoff();
    }
  }
}

void Informer::stop() {
  stopping_ = true;
  cancel_.cancel();
  std::lock_guard<std::mutex> lock(sleep_mutex_);
  wake_.notify_all();
}

void Informer::sleep_backoff() {
  // Full jitter on top of the exponential step: [backoff/2, backoff], so that many
  // controllers reconnecting after an API server restart spread out.
  std::uniform_int_distribution<long> pick(backoff_.count() / 2, backoff_.count());
  const std::chrono::milliseconds wait(pick(jitter_));
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  wake_.wait_for(lock, wait, [this] { return stopping_.load(); });
}

void Informer::relist() {
  ListResult listed = client_.list(path_, options_.label_selector);
  std::map<std::string, Json> fresh;
  for (Json& item : listed.items) {
    const std::string key = key_of(item);  // before the move: json assigns by value
    fresh[key] = std::move(item);
  }
  std::vector<std::pair<ChangeType, std::string>> changes;
  std::map<std::string, Json> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, object] : fresh) {
      const auto it = cache_.find(key);
      if (it == cache_.end()) {
        changes.emplace_back(ChangeType::kAdded, key);
      } else if (version_of(it->second) != version_of(object)) {
        changes.emplace_back(ChangeType::kModified, key);
      }
    }
    for (auto& [key, object] : cache_) {
      if (fresh.count(key) == 0) gone.emplace(key, std::move(object));
    }
    cache_ = fresh;
    resource_version_ = listed.resource_version;
    ++stats_.lists;
    need_list_ = false;
  }
  synced_ = true;
  for (const auto& [type, key] : changes) on_change_({type, key, fresh.at(key)});
  for (const auto& [key, object] : gone) on_change_({ChangeType::kDeleted, key, object});
}

void Informer::watch_once() {
  WatchRequest request;
  request.path = path_;
  request.label_selector = options_.label_selector;
  request.timeout_seconds = options_.watch_timeout_seconds;
  request.cancel = &cancel_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request.resource_version = resource_version_;
    ++stats_.watches;
  }
  client_.watch(request, [this](const WatchEvent& event) {
    apply_event(event);
    return !stopping_.load();
  });
}

void Informer::apply_event(const WatchEvent& event) {
  const std::string version = version_of(event.object);
  if (event.type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!version.empty()) resource_version_ = version;
    ++stats_.bookmarks;
    return;
  }
  const std::string key = key_of(event.object);
  ChangeType type;
  if (event.type == "ADDED") {
    type = ChangeType::kAdded;
  } else if (event.type == "MODIFIED") {
    type = ChangeType::kModified;
  } else if (event.type == "DELETED") {
    type = ChangeType::kDeleted;
  } else {
    spdlog::warn("watch {}: unknown event type '{}'", path_, event.type);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (type == ChangeType::kDeleted) {
      cache_.erase(key);
    } else {
      cache_[key] = event.object;
    }
    if (!version.empty()) resource_version_ = version;
  }
  on_change_({type, key, event.object});
}

std::optional<Json> Informer::get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> Informer::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Json> out;
  for (const auto& [key, object] : cache_) out.push_back(object);
  return out;
}

std::vector<std::string> Informer::keys() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [key, object] : cache_) out.push_back(key);
  return out;
}

std::string Informer::resource_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return resource_version_;
}

InformerStats Informer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace nibble::kube
