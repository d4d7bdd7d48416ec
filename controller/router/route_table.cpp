#include "controller/router/route_table.h"

namespace nibble::router {

void RouteTable::publish(RouteEntry entry) {
  {
    std::lock_guard lock(mutex_);
    std::string key = entry.recipe;
    by_recipe_[key] = std::move(entry);
  }
  changed_.notify_all();
}

bool RouteTable::publish_if_absent(RouteEntry entry) {
  {
    std::lock_guard lock(mutex_);
    std::string key = entry.recipe;
    if (!by_recipe_.emplace(std::move(key), std::move(entry)).second) return false;
  }
  changed_.notify_all();
  return true;
}

void RouteTable::remove(const std::string& recipe) {
  {
    std::lock_guard lock(mutex_);
    by_recipe_.erase(recipe);
  }
  changed_.notify_all();
}

std::optional<RouteEntry> RouteTable::find_by_model(const std::string& served_model_name) const {
  std::lock_guard lock(mutex_);
  for (const auto& [recipe, entry] : by_recipe_) {
    if (entry.served_model_name == served_model_name) return entry;
  }
  return std::nullopt;
}

std::optional<RouteEntry> RouteTable::find_by_recipe(const std::string& recipe) const {
  std::lock_guard lock(mutex_);
  auto it = by_recipe_.find(recipe);
  if (it == by_recipe_.end()) return std::nullopt;
  return it->second;
}

std::vector<RouteEntry> RouteTable::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<RouteEntry> out;
  for (const auto& [recipe, entry] : by_recipe_) out.push_back(entry);
  return out;
}

std::optional<RouteEntry> RouteTable::wait_for_ready(
    const std::string& recipe, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  std::optional<RouteEntry> found;
  changed_.wait_until(lock, deadline, [&] {
    auto it = by_recipe_.find(recipe);
    if (it == by_recipe_.end()) return true;  // removed: stop holding
    if (it->second.ready.empty() && it->second.unavailable.empty()) return false;
    found = it->second;
    return true;
  });
  return found;
}

}  // namespace nibble::router
