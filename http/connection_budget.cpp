#include "http/connection_budget.h"

namespace nibble::http {

void ConnectionBudget::queued() {
  std::lock_guard lock(mutex_);
  ++queued_;
}

void ConnectionBudget::dequeued() {
  std::lock_guard lock(mutex_);
  if (queued_ > 0) --queued_;
}

ConnectionBudget::Id ConnectionBudget::enter(std::string peer) {
  std::lock_guard lock(mutex_);
  const Id id = next_id_++;
  entries_[id] = Entry{std::move(peer), Wait::kRequest, Clock::now(), false};
  return id;
}

void ConnectionBudget::leave(Id id) {
  std::lock_guard lock(mutex_);
  entries_.erase(id);
}

void ConnectionBudget::set_wait(Id id, Wait wait, Clock::time_point since) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.wait = wait;
  it->second.since = since;
}

bool ConnectionBudget::evictable(const Entry& e, Clock::time_point now) const {
  return e.wait != Wait::kNone && !e.yielding && now - e.since >= grace_;
}

bool ConnectionBudget::must_yield(Id id) {
  std::lock_guard lock(mutex_);
  auto self = entries_.find(id);
  if (self == entries_.end()) return false;
  if (stopping_ && self->second.wait == Wait::kIdle) return true;
  const auto now = Clock::now();
  if (!evictable(self->second, now)) return false;
  const Entry& me = self->second;
  // Is `me` the longest waiting of the entries that `in_scope` selects?
  auto oldest = [&](auto in_scope) {
    for (const auto& [other_id, other] : entries_) {
      if (other_id == id || !in_scope(other) || !evictable(other, now)) continue;
      if (other.since < me.since || (other.since == me.since && other_id < id)) return false;
    }
    return true;
  };
  bool yield = false;
  if (queued_ > 0 && int(entries_.size()) >= workers_) {
    yield = oldest([](const Entry&) { return true; });
  }
  if (!yield && max_waiting_per_peer_ > 0 && me.wait == Wait::kRequest) {
    int waiting = 0;
    for (const auto& [other_id, other] : entries_) {
      if (other.peer == me.peer && other.wait == Wait::kRequest && evictable(other, now)) ++waiting;
    }
    yield = waiting > max_waiting_per_peer_ &&
            oldest([&](const Entry& e) { return e.peer == me.peer && e.wait == Wait::kRequest; });
  }
  if (yield) {
    self->second.yielding = true;
    ++yielded_;
  }
  return yield;
}

std::uint64_t ConnectionBudget::yielded() const {
  std::lock_guard lock(mutex_);
  return yielded_;
}

int ConnectionBudget::waiting(const std::string& peer) const {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const auto& [id, e] : entries_) n += e.peer == peer && e.wait == Wait::kRequest;
  return n;
}

}  // namespace nibble::http
