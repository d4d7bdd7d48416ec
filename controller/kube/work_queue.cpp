#include "controller/kube/work_queue.h"

#include <algorithm>

namespace nibble::kube {

WorkQueue::WorkQueue(WorkQueueOptions options) : options_(options) {}

void WorkQueue::add_locked(const std::string& key) {
  if (shutting_down_ || dirty_.count(key) > 0) return;
  dirty_.insert(key);
  if (processing_.count(key) > 0) return;  // queued again by done()
  queue_.push_back(key);
  changed_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_locked(key);
}

void WorkQueue::add_after(const std::string& key, std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutting_down_) return;
  if (delay <= std::chrono::milliseconds::zero()) {
    add_locked(key);
    return;
  }
  delayed_.emplace(Clock::now() + delay, key);
  changed_.notify_all();
}

std::chrono::milliseconds WorkQueue::next_delay(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = failures_.find(key);
  const int n = it == failures_.end() ? 0 : it->second;
  // base * 2^n, saturating at max without overflowing.
  auto delay = options_.base_delay;
  for (int i = 0; i < n && delay < options_.max_delay; ++i) delay *= 2;
  return std::min(delay, options_.max_delay);
}

void WorkQueue::add_rate_limited(const std::string& key) {
  const auto delay = next_delay(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++failures_[key];
  }
  add_after(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::failures(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const auto now = Clock::now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      const std::string key = delayed_.begin()->second;
      delayed_.erase(delayed_.begin());
      add_locked(key);
    }
    if (shutting_down_) return std::nullopt;
    if (!queue_.empty()) {
      std::string key = queue_.front();
      queue_.pop_front();
      dirty_.erase(key);
      processing_.insert(key);
      return key;
    }
    if (delayed_.empty()) {
      changed_.wait(lock);
    } else {
      changed_.wait_until(lock, delayed_.begin()->first);
    }
  }
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  processing_.erase(key);
  if (dirty_.count(key) > 0 && !shutting_down_) {
    queue_.push_back(key);
    changed_.notify_one();
  }
}

void WorkQueue::shut_down() {
  std::lock_guard<std::mutex> lock(mutex_);
  shutting_down_ = true;
  changed_.notify_all();
}

size_t WorkQueue::length() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

}  // namespace nibble::kube
