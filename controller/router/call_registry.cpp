#include "controller/router/call_registry.h"

#include <algorithm>

namespace nibble::router {

void CallRegistry::add(const std::shared_ptr<UpstreamCall>& call) {
  std::unique_lock lock(mutex_);
  if (cancelled_) {
    lock.unlock();
    call->cancel();
    return;
  }
  // Drop finished calls as new ones come, so the list stays as long as the calls in flight.
  std::erase_if(calls_, [](const std::weak_ptr<UpstreamCall>& c) { return c.expired(); });
  calls_.push_back(call);
}

void CallRegistry::cancel_all() {
  std::vector<std::weak_ptr<UpstreamCall>> calls;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    calls.swap(calls_);
  }
  for (const auto& weak : calls) {
    if (auto call = weak.lock()) call->cancel();
  }
}

}  // namespace nibble::router
